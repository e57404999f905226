"""Model providers: each speaks its API's own protocol and gets the answer format that suits it."""
