"""The Scheduler's watchdog over the Verifier (`watchdog`), the restarters it acts through (`restarters`) and the
lease that picks one acting watchdog among replicas (`lease`)."""
