// The decisions client: requests out in order, answers back to the scheduler.
#include "NpcMindCore/DecideClient.h"

#include "NpcMindCore/Limits.h"

namespace npcmind {

std::string HttpUrl(const std::string& url) {
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) return "";
    std::string out = url;
    while (!out.empty() && out.back() == '/') out.pop_back();
    return out;
}

std::string UrlEscape(const std::string& s) {
    static const char hex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~')
            out.push_back(static_cast<char>(c));
        else {
            out.push_back('%');
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        }
    }
    return out;
}

DecideClient::DecideClient(std::string serviceUrl, SchedulerOptions options, IHttpSender& http,
                           std::function<double()> clock)
    : base_(HttpUrl(serviceUrl)), scheduler_(std::move(options)), http_(http), clock_(std::move(clock)) {}

void DecideClient::Tick() {
    http_.Poll();  // the events of calls that ended (or streamed) come to the scheduler now, on this thread
    for (auto& r : scheduler_.Tick(clock_())) {
        outstanding_.insert(r.Ref);
        waiting_.push_back(std::move(r));
    }
    Dispatch();
}

void DecideClient::Dispatch() {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
        bool ready = true;
        for (const auto& a : it->After) ready = ready && !outstanding_.count(a);
        if (!ready) {
            ++it;
            continue;
        }
        OutRequest r = std::move(*it);
        it = waiting_.erase(it);
        Start(std::move(r));
    }
}

void DecideClient::Start(OutRequest r) {
    std::string ref = r.Ref;
    HttpCall call;
    call.Method = r.Method;
    call.Url = base_ + r.Path;
    call.Body = r.Json;
    call.TimeoutMs = scheduler_.TimeoutMs();
    call.MaxBytes = r.Path.rfind("/v1/policy", 0) == 0 ? Limits::MaxPolicyBytes : Limits::MaxAnswerBytes;
    call.Stream = r.Stream;
    for (const auto& h : r.Headers) {
        if (h.first == "authorization" && h.second.rfind("Bearer @", 0) == 0) {  // the token a session answer brought
            auto t = tokens_.find(h.second.substr(8));
            if (t == tokens_.end() || t->second.empty()) {
                outstanding_.erase(ref);
                scheduler_.Answer(ref, 401, Value(), {}, clock_());
                return;
            }
            call.RequestHeaders.emplace_back(h.first, "Bearer " + t->second);
        } else {
            call.RequestHeaders.push_back(h);
        }
    }
    if (!call.Body.empty()) call.RequestHeaders.emplace_back("content-type", "application/json");
    bool session = r.Path == "/v1/session";
    bool policy = r.Path.rfind("/v1/policy", 0) == 0;
    HttpEvents events;
    events.Chunk = [this, ref](const std::string& data) { scheduler_.Chunk(ref, data, clock_()); };
    events.Done = [this, ref, session, policy](int status, const Headers& headers, const std::string& body,
                                                 bool streamed, FailKind failed, const std::string& error) {
        outstanding_.erase(ref);
        double now = clock_();
        if (streamed) {
            if (status == 0) scheduler_.End(ref, now, failed, error);
            else scheduler_.End(ref, now);
        } else if (status == 0) {
            scheduler_.Fail(ref, failed, now, error);
        } else {
            Parsed p = Json::Parse(body);
            if (session) tokens_[ref] = Session::SessionToken(status, p.value);
            scheduler_.Answer(ref, status, p.value, headers, now, policy ? &body : nullptr);
        }
        Dispatch();
    };
    http_.Send(call, std::move(events));
}

}  // namespace npcmind
