"""The HTTP layer: routes, errors and the OpenAPI document."""
