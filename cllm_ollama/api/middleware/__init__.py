"""What every dialect's requests pass through: API keys, CORS, allowed hosts, body limits, metrics
and the drain at shutdown."""
