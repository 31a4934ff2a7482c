"""Request bodies as typed structs (msgspec), the one description decoding and OpenAPI both read."""
