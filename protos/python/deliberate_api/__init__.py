"""The contract of deliberate as Python code, generated from protos/ by `make proto` (do not edit the *_pb2*
files). Import `deliberate_api.<service>.v1`; the proto packages stay `deliberate.<service>.v1`."""
