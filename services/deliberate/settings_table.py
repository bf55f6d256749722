"""Prints the README's configuration table from the settings models: `python -m deliberate.settings_table`."""

from __future__ import annotations

from .core.config import CommonSettings, markdown_table
from .drafter.settings import DrafterSettings
from .gateway.settings import GatewaySettings
from .refiner.settings import RefinerSettings
from .risk.settings import RiskSettings
from .scheduler.settings import SchedulerSettings
from .verifier.settings import VerifierSettings

if __name__ == "__main__":
    print(
        markdown_table(
            {
                "all": CommonSettings,
                "scheduler": SchedulerSettings,
                "drafter": DrafterSettings,
                "verifier": VerifierSettings,
                "refiner": RefinerSettings,
                "gateway": GatewaySettings,
                "risk": RiskSettings,
            }
        )
    )
