"""The surfaces the amplification harness feeds: one module per owner of an input path, each listing SURFACES."""
