"""The learned cascade's trainer (issue 23): distill the model's stored decisions into a portable policy file.

Needs the ``distill`` extra (scikit-learn); the file it writes needs nothing to run (``npcmind_client.policy``).
"""
