"""gRPC edge of the risk model: validates the inputs, scores the offer, records the figures on the call's span."""

from __future__ import annotations

import logging

import grpc
from opentelemetry import trace

from deliberate_api.risk.v1 import risk_model_service_pb2, risk_model_service_pb2_grpc

from ..core import telemetry
from .model import Applicant, InvalidInput, Offer, score

log = logging.getLogger("deliberate.risk")


class RiskModelServicer(risk_model_service_pb2_grpc.RiskModelServiceServicer):
    async def Score(self, request, context: grpc.aio.ServicerContext):  # noqa: N802 (gRPC naming)
        if not request.HasField("applicant") or not request.HasField("offer"):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "applicant and offer are required")
        a, o = request.applicant, request.offer
        applicant = Applicant(a.annual_income, a.monthly_debt_payments, a.credit_score, a.collateral_value)
        offer = Offer(o.amount, o.annual_rate, o.term_months)
        try:
            result = score(applicant, offer)
        except InvalidInput as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        # The server span the gRPC instrumentation opened for this call, under the Verifier's client span.
        span = trace.get_current_span()
        span.set_attributes(
            {
                telemetry.RISK_PD: result.probability_of_default,
                telemetry.RISK_LGD: result.loss_given_default,
                telemetry.RISK_MODEL_VERSION: result.model_version,
            }
        )
        if request.request_id:
            span.set_attribute(telemetry.REQUEST_ID, request.request_id)
        return risk_model_service_pb2.ScoreResponse(
            probability_of_default=result.probability_of_default,
            loss_given_default=result.loss_given_default,
            model_version=result.model_version,
            monthly_payment=result.monthly_payment,
            debt_to_income=result.debt_to_income,
        )
