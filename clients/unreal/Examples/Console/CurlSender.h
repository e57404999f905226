// An IHttpSender over libcurl's multi interface, polled from the game's Tick (no thread of its own): the console
// programs' stand-in for Unreal's FHttpModule. A 200 in application/x-ndjson is given as chunks as they arrive;
// every other body is read no further than one byte past its cap.
#pragma once

#include <curl/curl.h>

#include <cctype>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "NpcMindCore/Limits.h"
#include "NpcMindCore/Transport.h"

namespace npcmind {

class CurlSender : public IHttpSender {
public:
    CurlSender() : multi_(curl_multi_init()) {}
    ~CurlSender() override {
        for (auto& kv : calls_) Drop(*kv.second);
        curl_multi_cleanup(multi_);
    }
    CurlSender(const CurlSender&) = delete;
    CurlSender& operator=(const CurlSender&) = delete;

    void Send(const HttpCall& call, HttpEvents events) override {
        auto c = std::make_unique<Call>();
        c->events = std::move(events);
        c->call = call;
        c->easy = curl_easy_init();
        CURL* e = c->easy;
        curl_easy_setopt(e, CURLOPT_URL, c->call.Url.c_str());
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(call.TimeoutMs));
        if (call.Method != "GET") {
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, c->call.Method.c_str());
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->call.Body.c_str());
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, static_cast<long>(c->call.Body.size()));
        }
        for (const auto& h : call.RequestHeaders) c->list = curl_slist_append(c->list, (h.first + ": " + h.second).c_str());
        if (call.Stream) c->list = curl_slist_append(c->list, "Accept: application/x-ndjson");
        c->list = curl_slist_append(c->list, "Expect:");
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->list);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &CurlSender::OnHeader);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, c.get());
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &CurlSender::OnData);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, c.get());
        curl_multi_add_handle(multi_, e);
        calls_[e] = std::move(c);
    }

    void Poll() override {
        int running = 0;
        curl_multi_perform(multi_, &running);
        std::vector<std::pair<CURL*, CURLcode>> done;
        int left = 0;
        while (CURLMsg* m = curl_multi_info_read(multi_, &left))
            if (m->msg == CURLMSG_DONE) done.emplace_back(m->easy_handle, m->data.result);
        for (auto& d : done) {
            std::unique_ptr<Call> c = std::move(calls_[d.first]);
            calls_.erase(d.first);
            Drop(*c);
            if (d.second == CURLE_OK && !c->tooLarge) {
                c->events.Done(c->status, c->headers, c->body, c->streamed, FailKind::Unreachable, "");
                continue;
            }
            FailKind kind = c->tooLarge ? FailKind::TooLarge
                            : d.second == CURLE_OPERATION_TIMEDOUT ? FailKind::Timeout : FailKind::Unreachable;
            std::string why = c->tooLarge ? Limits::TooLarge(c->call.Method + " " + c->call.Url, c->cap, "Limits")
                                          : curl_easy_strerror(d.second);
            c->events.Done(0, c->headers, "", c->streamed, kind, why);
        }
    }

    bool Busy() const override { return !calls_.empty(); }

    /// One call made to its end (the dialogue turn's way: a console program may block): status 0 when none came.
    int Perform(const HttpCall& call, std::string& body, std::string& error) {
        int status = -1;
        HttpEvents events;
        events.Done = [&](int s, const Headers&, const std::string& b, bool, FailKind, const std::string& e) {
            status = s;
            body = b;
            error = e;
        };
        Send(call, events);
        while (status < 0) {
            int ready = 0;
            curl_multi_poll(multi_, nullptr, 0, 50, &ready);
            Poll();
        }
        return status;
    }

private:
    struct Call {
        HttpCall call;
        HttpEvents events;
        CURL* easy = nullptr;
        curl_slist* list = nullptr;
        int status = 0;
        Headers headers;
        std::string body;
        bool ndjson = false, streamed = false, tooLarge = false;
        size_t cap = 0, seen = 0;
    };

    static size_t OnHeader(char* data, size_t size, size_t n, void* self) {
        auto* c = static_cast<Call*>(self);
        std::string line(data, size * n);
        while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
        if (line.rfind("HTTP/", 0) == 0) {  // a status line (a 100 Continue comes before the real one)
            size_t sp = line.find(' ');
            c->status = sp == std::string::npos ? 0 : std::atoi(line.c_str() + sp + 1);
            c->headers.clear();
            return size * n;
        }
        size_t colon = line.find(':');
        if (colon == std::string::npos) return size * n;
        std::string name = line.substr(0, colon), value = line.substr(colon + 1);
        for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        if (name == "content-type") c->ndjson = value.rfind("application/x-ndjson", 0) == 0;
        c->headers.emplace_back(name, value);
        return size * n;
    }

    static size_t OnData(char* data, size_t size, size_t n, void* self) {
        auto* c = static_cast<Call*>(self);
        size_t got = size * n;
        c->seen += got;
        if (c->call.Stream && c->status == 200 && c->ndjson) {
            c->cap = Limits::MaxStreamBytes;
            if (c->seen > c->cap) {
                c->tooLarge = true;
                return 0;  // aborts the transfer: not read past the cap
            }
            c->streamed = true;
            if (c->events.Chunk) c->events.Chunk(std::string(data, got));
            return got;
        }
        c->cap = Limits::For(c->status, c->call.MaxBytes);
        if (c->seen > c->cap) {
            c->tooLarge = true;
            return 0;
        }
        c->body.append(data, got);
        return got;
    }

    void Drop(Call& c) {
        if (!c.easy) return;
        curl_multi_remove_handle(multi_, c.easy);
        curl_easy_cleanup(c.easy);
        curl_slist_free_all(c.list);
        c.easy = nullptr;
        c.list = nullptr;
    }

    CURLM* multi_;
    std::map<CURL*, std::unique_ptr<Call>> calls_;
};

}  // namespace npcmind
