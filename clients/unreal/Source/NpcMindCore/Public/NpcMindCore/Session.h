// A hosted service's session (no I/O): opened with the api key, renewed at 90% of its life, reopened on a 401.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "NpcMindCore/Json.h"

namespace npcmind {

using Headers = std::vector<std::pair<std::string, std::string>>;

/// The session token a hosted client sends, and when to ask for the next one.
class Session {
public:
    /// A renewal the service refused is tried again after this, with the old token.
    static constexpr double RenewRetryMs = 30000;
    /// The ref of the POST /v1/session in flight, if any.
    std::optional<std::string> Pending;
    const std::string ApiKey;

    explicit Session(std::string apiKey) : ApiKey(std::move(apiKey)) {}
    /// Whether requests may go: a token is held (an old one while it is renewed).
    bool Open() const { return token_.has_value(); }
    /// Whether requests may be made: a token held, or one asked for (they wait for it).
    bool Ready() const { return token_ || Pending; }
    /// The session request the others must wait for: the first one (a renewal goes on with the old token).
    std::vector<std::string> Awaited() const;
    /// Whether to ask for a session now: none yet, or the token near its expiry.
    bool Due(double now) const { return !Pending && (!token_ || now >= renewAt_); }
    /// The headers of the session request itself: the api key.
    Headers KeyHeaders() const { return {{"authorization", "Bearer " + ApiKey}}; }
    /// The headers of every other request; while the first token is asked for, `Bearer @ref`.
    Headers RequestHeaders() const;
    /// The session request's answer; the reason when it was refused, else "".
    std::string Answer(int status, const Value& body, double now);
    /// The session request got no answer.
    void Failed(double now);
    /// The service said the session ended (a 401): a new one before the next request.
    void Expire();
    /// The token a POST /v1/session answer brings, or "": read by the session and by the transport.
    static std::string SessionToken(int status, const Value& body);

private:
    std::optional<std::string> token_;
    double renewAt_ = std::numeric_limits<double>::infinity();
};

}  // namespace npcmind
