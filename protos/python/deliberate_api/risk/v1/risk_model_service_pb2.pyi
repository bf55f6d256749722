from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Applicant(_message.Message):
    __slots__ = ("annual_income", "monthly_debt_payments", "credit_score", "collateral_value")
    ANNUAL_INCOME_FIELD_NUMBER: _ClassVar[int]
    MONTHLY_DEBT_PAYMENTS_FIELD_NUMBER: _ClassVar[int]
    CREDIT_SCORE_FIELD_NUMBER: _ClassVar[int]
    COLLATERAL_VALUE_FIELD_NUMBER: _ClassVar[int]
    annual_income: float
    monthly_debt_payments: float
    credit_score: int
    collateral_value: float
    def __init__(self, annual_income: _Optional[float] = ..., monthly_debt_payments: _Optional[float] = ..., credit_score: _Optional[int] = ..., collateral_value: _Optional[float] = ...) -> None: ...

class Offer(_message.Message):
    __slots__ = ("amount", "annual_rate", "term_months")
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    ANNUAL_RATE_FIELD_NUMBER: _ClassVar[int]
    TERM_MONTHS_FIELD_NUMBER: _ClassVar[int]
    amount: float
    annual_rate: float
    term_months: int
    def __init__(self, amount: _Optional[float] = ..., annual_rate: _Optional[float] = ..., term_months: _Optional[int] = ...) -> None: ...

class ScoreRequest(_message.Message):
    __slots__ = ("request_id", "applicant", "offer")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    APPLICANT_FIELD_NUMBER: _ClassVar[int]
    OFFER_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    applicant: Applicant
    offer: Offer
    def __init__(self, request_id: _Optional[str] = ..., applicant: _Optional[_Union[Applicant, _Mapping]] = ..., offer: _Optional[_Union[Offer, _Mapping]] = ...) -> None: ...

class ScoreResponse(_message.Message):
    __slots__ = ("probability_of_default", "loss_given_default", "model_version", "monthly_payment", "debt_to_income")
    PROBABILITY_OF_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    LOSS_GIVEN_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    MONTHLY_PAYMENT_FIELD_NUMBER: _ClassVar[int]
    DEBT_TO_INCOME_FIELD_NUMBER: _ClassVar[int]
    probability_of_default: float
    loss_given_default: float
    model_version: str
    monthly_payment: float
    debt_to_income: float
    def __init__(self, probability_of_default: _Optional[float] = ..., loss_given_default: _Optional[float] = ..., model_version: _Optional[str] = ..., monthly_payment: _Optional[float] = ..., debt_to_income: _Optional[float] = ...) -> None: ...
