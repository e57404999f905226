// Refusals, read by path.
#include "NpcMindCore/Refusals.h"

#include "NpcMindCore/Errors.h"

namespace npcmind {

namespace {
/// `entities[N]` (and an optional `.`) at the start of a problem's path: N and where the rest starts.
bool EntityPath(const std::string& path, size_t& index, size_t& rest) {
    static const std::string head = "entities[";
    if (path.compare(0, head.size(), head) != 0) return false;
    size_t i = head.size(), n = 0;
    size_t start = i;
    while (i < path.size() && path[i] >= '0' && path[i] <= '9') {
        if (n < 1000000) n = n * 10 + static_cast<size_t>(path[i] - '0');
        i++;
    }
    if (i == start || i >= path.size() || path[i] != ']') return false;
    i++;
    if (i < path.size() && path[i] == '.') i++;
    index = n;
    rest = i;
    return true;
}
}  // namespace

std::optional<std::vector<std::pair<std::string, std::string>>> Refusals::Entities(
    int status, const Value& body, const std::vector<std::pair<std::string, std::string>>& sent) {
    std::vector<std::string> ids;
    for (const auto& p : sent) ids.push_back(p.first);
    auto found = RefusedEntities(status, body, ids);
    if (!found) return found;
    for (const auto& kv : *found) {
        stats_.Refused++;
        Alone[kv.first] = kv.second;
        std::string type = "entity";
        for (const auto& p : sent)
            if (p.first == kv.first) {
                type = p.second;
                break;
            }
        std::string said = "npcmind refused " + type + " " + Json::Quote(kv.first) + " (" + kv.second +
                           "): the others go on without it, and it is sent alone until the service takes it";
        say_("refused:" + kv.first + ":" + kv.second, said, true);
    }
    return found;
}

void Refusals::Said(int status, const Value& body, bool hosted) {
    std::string msg = "npcmind answered " + std::to_string(status) + " " + Errors::ReadError(body).Code + ": " +
                      Errors::ErrorLine(body, "");
    if (status == 401 && !hosted) msg += " (the service runs the hosted profile: give the client its api key)";
    say_(std::to_string(status) + ":" + Errors::Unnumbered(msg), msg, true);
}

double Refusals::RetryAfterMs(const Headers& headers) {
    for (const auto& h : headers) {
        if (h.first != "retry-after") continue;
        const std::string& v = h.second;
        size_t i = 0;
        while (i < v.size() && v[i] >= '0' && v[i] <= '9') i++;
        bool ok = i > 0 && i <= 12;
        if (ok && i < v.size()) {
            ok = v[i] == '.' && i + 1 < v.size() && v.size() < 24;
            for (size_t j = i + 1; ok && j < v.size(); j++) ok = v[j] >= '0' && v[j] <= '9';
        }
        double seconds = 0;
        bool integer = false;
        if (ok && Json::ReadNumber(v, seconds, integer)) return seconds * 1000;
    }
    return 1000;
}

std::optional<std::vector<std::pair<std::string, std::string>>> Refusals::RefusedEntities(
    int status, const Value& body, const std::vector<std::string>& sent) {
    if (status != 422) return std::nullopt;
    std::vector<Problem> details = Errors::ReadError(body).Details;
    if (details.empty()) return std::nullopt;
    std::vector<std::pair<std::string, std::string>> result;
    std::unordered_map<std::string, size_t> at;
    for (const auto& d : details) {
        size_t index, rest;
        if (!EntityPath(d.Path, index, rest) || index >= sent.size()) return std::nullopt;
        const std::string& id = sent[index];
        std::string tail = d.Path.substr(rest);
        std::string problem = (tail.empty() ? "entity" : tail) + ": " + d.Message;
        auto f = at.find(id);
        if (f == at.end()) {
            at[id] = result.size();
            result.emplace_back(id, problem);
        } else {
            result[f->second].second += "; " + problem;
        }
    }
    return result;
}

}  // namespace npcmind
