"""Driver programs the tests run as separate processes (so that they can be SIGKILLed)."""
