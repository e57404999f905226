"""Sessions and security: clients and their keys, signed session tokens, who may see what, request rates."""
