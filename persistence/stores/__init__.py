"""The stores of every record family, written once over the engine interface (:mod:`persistence.engine`)."""
