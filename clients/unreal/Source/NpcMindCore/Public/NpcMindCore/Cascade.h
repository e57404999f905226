// The cascade's local policy (no I/O): the game's own, or the one the service distilled from the model's
// decisions (GET /v1/policy), so a game gets better without a release. The rules are the other SDKs'
// (clients/conformance/README.md).
#pragma once

#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "NpcMindCore/Policy.h"
#include "NpcMindCore/Say.h"
#include "NpcMindCore/Session.h"

namespace npcmind {

/// What a game may give as its local policy: a distilled file or a function (one of the two).
struct LocalPolicy {
    std::shared_ptr<Policy> File;
    PolicyFunction Function;
    bool Given() const { return File != nullptr || static_cast<bool>(Function); }
};

/// Which local policy decides before the service, and when to ask the service for its own.
class Cascade {
public:
    /// A minute: a new policy comes at most every --distill-every hours; a 304 a minute costs the service nothing.
    static constexpr double DefaultPolicyRefreshMs = 60000;
    LocalPolicy Own;
    bool Fetch;
    std::shared_ptr<Policy> Fetched;
    std::string ManifestVersion;
    /// A policy for another version came: the manifest may have changed, ask it again.
    bool RecheckManifest = false;
    size_t MaxBytes;

    Cascade(std::string clientId, LocalPolicy policy, std::optional<bool> fetch, double refreshMs, SayOnce& say,
            std::string manifestVersion, size_t maxBytes);
    /// The active policy's choice for `e`, or nullopt: ask the service.
    std::optional<PolicyChoice> Choose(const Entity& e, const Value& world, const Value& scopeState);
    /// Whether GET /v1/policy goes out now (fetching on, the manifest version known, none in flight).
    bool Due(double now) const { return Fetch && !ManifestVersion.empty() && !asking_ && now >= next_; }
    /// The path and the extra headers of GET /v1/policy; the next is due refreshMs later.
    std::string Request(double now, Headers& headers);
    /// Take the answer to GET /v1/policy (its body as text); false for an answer the scheduler deals with.
    bool Answered(int status, const std::string& text, const Value* parsed, const Headers& headers);
    /// GET /v1/policy got no answer: asked again on its period.
    void Failed() { asking_ = false; }
    /// The manifest version the service runs now.
    void Manifest(const std::string& version);

private:
    const LocalPolicy* Active();
    void Drop() {
        Fetched.reset();
        etag_.clear();
    }
    std::string clientId_;
    double refreshMs_;
    SayOnce& say_;
    std::string etag_;
    double next_ = -std::numeric_limits<double>::infinity();
    bool asking_ = false;
    LocalPolicy active_;
};

}  // namespace npcmind
