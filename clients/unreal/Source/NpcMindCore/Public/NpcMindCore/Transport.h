// The seam an engine's HTTP plugs into (the C# SDK's IHttpSender): Unreal's FHttpModule in the plugin, libcurl in
// the console programs the tests run. Calls are made and their events delivered on the game thread (FHttpModule
// calls back on it; the curl sender is polled from Tick), so nothing here locks.
#pragma once

#include <functional>
#include <string>

#include "NpcMindCore/Session.h"
#include "NpcMindCore/Types.h"

namespace npcmind {

/// One HTTP call.
struct HttpCall {
    std::string Method;
    std::string Url;
    Headers RequestHeaders;
    std::string Body;
    double TimeoutMs = 30000;
    /// The body is read no further than one byte past this (an error's past Limits::MaxErrorBytes).
    size_t MaxBytes = 1024 * 1024;
    /// A 200 in `application/x-ndjson` is given as chunks as they arrive (`Accept: application/x-ndjson` is sent).
    bool Stream = false;
};

/// What became of a call: chunks of a streamed 200, then the end; or the whole answer; or a failure.
struct HttpEvents {
    /// Bytes of a streamed 200 (NDJSON), as they arrive.
    std::function<void(const std::string& data)> Chunk;
    /// The call ended: `status` 0 when it got no answer (`failed` says why); `streamed` when chunks were given.
    std::function<void(int status, const Headers& headers, const std::string& body, bool streamed, FailKind failed,
                       const std::string& error)>
        Done;
};

/// An engine's HTTP.
class IHttpSender {
public:
    virtual ~IHttpSender() = default;
    /// Start a call; its events come later, from Poll (or the engine's own callbacks on the game thread).
    virtual void Send(const HttpCall& call, HttpEvents events) = 0;
    /// Give the events that arrived (a polled sender's work; an engine's own callbacks need none).
    virtual void Poll() {}
    /// Whether calls are still out.
    virtual bool Busy() const = 0;
};

}  // namespace npcmind
