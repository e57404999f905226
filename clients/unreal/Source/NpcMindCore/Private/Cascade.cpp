// The cascade's rules.
#include "NpcMindCore/Cascade.h"
#include "NpcMindCore/DecideClient.h"

#include "NpcMindCore/Errors.h"

namespace npcmind {

namespace {
/// A policy's message without its figures and digests: one line a kind of problem.
std::string Kind(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size();) {
        if (s.compare(i, 7, "sha256:") == 0) {
            i += 7;
            while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) i++;
            out += "#";
        } else if (s[i] >= '0' && s[i] <= '9') {
            while (i < s.size() && s[i] >= '0' && s[i] <= '9') i++;
            out += "#";
        } else {
            out.push_back(s[i++]);
        }
    }
    return out;
}

}  // namespace

Cascade::Cascade(std::string clientId, LocalPolicy policy, std::optional<bool> fetch, double refreshMs, SayOnce& say,
                 std::string manifestVersion, size_t maxBytes)
    : Own(std::move(policy)),
      Fetch(fetch ? *fetch : !Own.Given()),
      ManifestVersion(std::move(manifestVersion)),
      MaxBytes(maxBytes),
      clientId_(std::move(clientId)),
      refreshMs_(refreshMs),
      say_(say) {}

const LocalPolicy* Cascade::Active() {
    if (Fetched) {
        active_.File = Fetched;
        active_.Function = nullptr;
        return &active_;
    }
    if (Own.File && !ManifestVersion.empty() && Own.File->ManifestVersion != ManifestVersion) {
        say_.Say("own-policy:" + ManifestVersion,
                 "the game's policy was distilled for manifest version " + Own.File->ManifestVersion +
                     ", and the service runs " + ManifestVersion +
                     ": a policy for another manifest version is never used (distill again)");
        return nullptr;
    }
    return Own.Given() ? &Own : nullptr;
}

std::optional<PolicyChoice> Cascade::Choose(const Entity& e, const Value& world, const Value& scopeState) {
    const LocalPolicy* policy = Active();
    if (!policy) return std::nullopt;
    if (policy->File) {
        Value trigger = e.Trigger ? Value(*e.Trigger) : Value();
        Value profile = e.Extra.Profile ? Value(*e.Extra.Profile) : Value();
        return policy->File->Choose(Value(e.Type), e.Observation, Value::Strings(e.LegalActions), world, scopeState,
                                    trigger, profile);
    }
    auto got = policy->Function(e);
    if (!got || got->Action.empty()) return std::nullopt;  // ["", 0]: the function's way of saying "ask the service"
    return got;
}

std::string Cascade::Request(double now, Headers& headers) {
    asking_ = true;
    next_ = now + refreshMs_;
    headers.clear();
    if (!etag_.empty()) headers.emplace_back("if-none-match", etag_);
    return "/v1/policy?client_id=" + UrlEscape(clientId_);
}

bool Cascade::Answered(int status, const std::string& text, const Value* parsed, const Headers& headers) {
    asking_ = false;
    if (status == 304) return true;
    if (status == 404) {
        Drop();
        return true;
    }
    if (status != 200) return false;
    std::string error;
    std::shared_ptr<Policy> loaded =
        parsed ? Policy::Load(*parsed, error) : Policy::Load(text, error, "", MaxBytes);
    if (loaded && !ManifestVersion.empty()) error = loaded->Check(ManifestVersion);
    if (loaded && error.empty()) {
        Fetched = loaded;
        etag_.clear();
        for (const auto& h : headers)
            if (h.first == "etag") etag_ = h.second;
        return true;
    }
    Drop();
    std::string version;
    bool known = loaded != nullptr || (parsed && parsed->IsObject());
    if (loaded) version = loaded->ManifestVersion;
    else if (parsed) version = (*parsed)["manifest_version"].AsString();
    RecheckManifest = known && version != ManifestVersion;
    say_.Say("policy:" + Kind(error), "the service's local policy is not used: " + error, false);
    return true;
}

void Cascade::Manifest(const std::string& version) {
    RecheckManifest = false;
    if (version.empty() || version == ManifestVersion) return;
    ManifestVersion = version;
    Drop();
    next_ = -std::numeric_limits<double>::infinity();
}

}  // namespace npcmind
