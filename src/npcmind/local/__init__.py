"""State one process owns alone and loses on restart: metrics, in-flight calls, caches of durable rows.

Nothing here is shared with another process or needed after a restart; the durable truth is in
`npcmind.storage`, the soft state processes share is in `npcmind.shared`, a session's own state is in
`npcmind.context`.
"""
