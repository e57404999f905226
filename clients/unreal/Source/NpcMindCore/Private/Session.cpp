// The hosted session's rules.
#include "NpcMindCore/Session.h"

#include "NpcMindCore/Errors.h"

namespace npcmind {

std::vector<std::string> Session::Awaited() const {
    if (Pending && !token_) return {*Pending};
    return {};
}

Headers Session::RequestHeaders() const {
    if (token_) return {{"authorization", "Bearer " + *token_}};
    if (Pending) return {{"authorization", "Bearer @" + *Pending}};
    return {};
}

std::string Session::Answer(int status, const Value& body, double now) {
    Pending.reset();
    std::string t = SessionToken(status, body);
    if (t.empty()) {
        if (token_) renewAt_ = now + RenewRetryMs;  // a tenth of its life left: go on with it
        return "npcmind did not open a session (POST /v1/session answered " + std::to_string(status) + ": " +
               Errors::ErrorLine(body, "(no session_token)") + ")";
    }
    const Value& ttl = body["expires_in_s"];
    token_ = t;
    renewAt_ = ttl.IsNumber() ? now + 0.9 * ttl.AsNumber() * 1000 : std::numeric_limits<double>::infinity();
    return "";
}

void Session::Failed(double now) {
    Pending.reset();
    if (token_) renewAt_ = now + RenewRetryMs;
}

void Session::Expire() {
    token_.reset();
    renewAt_ = std::numeric_limits<double>::infinity();
}

std::string Session::SessionToken(int status, const Value& body) {
    const Value& t = body["session_token"];
    return status == 200 && t.IsString() ? t.AsString() : "";
}

}  // namespace npcmind
