// The dialogue step machine, the in-memory NPCs and the OpenAI-compatible cortex.
#include "NpcMindCore/Npc.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "NpcMindCore/DecideClient.h"
#include "NpcMindCore/Errors.h"
#include "NpcMindCore/Limits.h"
#include "NpcMindCore/Signing.h"

namespace npcmind {

Value MergePatch(const Value& target, const Value& patch) {
    if (!patch.IsObject()) return patch;
    Value out = target.IsObject() ? target.ShallowCopy() : Value::MakeObject();
    for (const auto& m : patch.Members()) {
        if (m.value.IsNull()) out.Remove(m.key);
        else out.Set(m.key, MergePatch(out[m.key], m.value));
    }
    return out;
}

// --- memory --------------------------------------------------------------------------------------------------

namespace {
/// The words of a text (ASCII letters and digits; other UTF-8 bytes are kept as parts of words), lowercased.
std::set<std::string> Words(const std::string& text) {
    std::set<std::string> out;
    std::string w;
    for (char c : text) {
        unsigned char u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || u >= 0x80) w.push_back(static_cast<char>(std::tolower(u)));
        else if (!w.empty()) {
            out.insert(w);
            w.clear();
        }
    }
    if (!w.empty()) out.insert(w);
    return out;
}
}  // namespace

bool InMemoryNpcs::Register(const std::string& npcId, const std::string& persona, Value data, Value state) {
    if (npcId.empty() || npcId.find('/') != std::string::npos) return false;
    std::lock_guard<std::mutex> lock(gate_);
    npcs_[npcId] = NpcRecord{npcId, persona, data.IsObject() ? data : Value::MakeObject(),
                             state.IsObject() ? state : Value::MakeObject()};
    return true;
}

std::optional<NpcRecord> InMemoryNpcs::Get(const std::string& npcId) {
    std::lock_guard<std::mutex> lock(gate_);
    auto f = npcs_.find(npcId);
    if (f == npcs_.end()) return std::nullopt;
    return f->second;
}

std::vector<RecalledMemory> InMemoryNpcs::Recall(const std::string& npcId, const std::string& query, int limit,
                                                 double threshold) {
    std::vector<NewMemory> all = Remembered(npcId);
    std::set<std::string> q = Words(query);
    std::vector<RecalledMemory> out;
    for (const auto& m : all) {
        std::set<std::string> w = Words(m.Text);
        size_t shared = 0;
        for (const auto& x : w) shared += q.count(x);
        size_t both = w.size() + q.size() - shared;
        double similarity = static_cast<double>(shared) / static_cast<double>(std::max<size_t>(1, both));
        if (similarity >= threshold) out.push_back(RecalledMemory{m.Text, m.Type, m.Importance, similarity});
    }
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.Similarity > b.Similarity; });
    if (out.size() > static_cast<size_t>(std::max(0, limit))) out.resize(static_cast<size_t>(std::max(0, limit)));
    return out;
}

Value InMemoryNpcs::Apply(const std::string& npcId, const std::vector<NewMemory>& kept, const Value& stateTransform) {
    std::lock_guard<std::mutex> lock(gate_);
    auto f = npcs_.find(npcId);
    if (f == npcs_.end()) return Value();
    f->second.State = MergePatch(f->second.State, stateTransform.IsObject() ? stateTransform : Value::MakeObject());
    auto& list = memories_[npcId];
    list.insert(list.end(), kept.begin(), kept.end());
    return f->second.State;
}

std::vector<NewMemory> InMemoryNpcs::Remembered(const std::string& npcId) {
    std::lock_guard<std::mutex> lock(gate_);
    auto f = memories_.find(npcId);
    return f == memories_.end() ? std::vector<NewMemory>() : f->second;
}

// --- cortex --------------------------------------------------------------------------------------------------

PromptConstraints PromptConstraints::Read(const Value& c) {
    PromptConstraints out;
    if (c["maxTokens"].IsNumber())
        out.MaxTokens = static_cast<int>(std::min(2147483647.0, std::max(0.0, c["maxTokens"].AsNumber())));
    if (c["temperature"].IsNumber()) out.Temperature = c["temperature"].AsNumber();
    for (const auto& s : c["stop"].Items())
        if (s.IsString()) out.Stop.push_back(s.AsString());
    return out;
}

OpenAICortex::OpenAICortex(const std::string& baseUrl, std::string model, std::string apiKey)
    : Url(HttpUrl(baseUrl) + "/chat/completions"), Model(std::move(model)), ApiKey(std::move(apiKey)) {}

HttpCall OpenAICortex::Request(const std::string& prompt, const PromptConstraints& constraints) const {
    Value message = Value::MakeObject();
    message.Set("role", "user");
    message.Set("content", prompt);
    Value messages = Value::MakeArray();
    messages.Push(message);
    Value body = Value::MakeObject();
    body.Set("model", Model);
    body.Set("messages", messages);
    if (constraints.MaxTokens) body.Set("max_tokens", *constraints.MaxTokens);
    if (constraints.Temperature) body.Set("temperature", *constraints.Temperature);
    if (!constraints.Stop.empty()) body.Set("stop", Value::Strings(constraints.Stop));
    HttpCall call;
    call.Method = "POST";
    call.Url = Url;
    call.Body = Json::Show(body);
    call.RequestHeaders.emplace_back("content-type", "application/json");
    if (!ApiKey.empty()) call.RequestHeaders.emplace_back("authorization", "Bearer " + ApiKey);
    call.TimeoutMs = TimeoutMs;
    call.MaxBytes = Limits::MaxCortexBytes;
    return call;
}

bool OpenAICortex::Read(int status, const std::string& body, const std::string& transportError, std::string& text,
                        std::string& error) const {
    if (status == 0) {
        error = "cannot reach the cortex: " + transportError + " (" + Url + ")";
        return false;
    }
    if (body.size() > Limits::For(status, Limits::MaxCortexBytes)) {
        error = Limits::TooLarge("the cortex answered HTTP " + std::to_string(status), Limits::For(status, Limits::MaxCortexBytes),
                                 status >= 400 ? "Limits.MaxErrorBytes" : "Limits.MaxCortexBytes") + " (" + Url + ")";
        return false;
    }
    if (status < 200 || status > 299) {
        error = "the cortex answered HTTP " + std::to_string(status) + ": " + body.substr(0, 200) + " (" + Url + ")";
        return false;
    }
    Parsed p = Json::Parse(body);
    const Value& choices = p.value["choices"];
    if (!p.Ok() || choices.Size() == 0 || !choices.Items()[0]["message"].IsObject()) {
        error = "the cortex answered without choices[0].message.content (" + Url + ")";
        return false;
    }
    text = Errors::Text(choices.Items()[0]["message"]["content"]);  // null content (a refusal): no text
    return true;
}

// --- the step machine ----------------------------------------------------------------------------------------

DialogueTurn::DialogueTurn(std::string serviceUrl, std::string npcId, std::string observation, INpcMemory& memory,
                           std::string token, std::map<std::string, std::string> keys, Value context,
                           std::string ruleset)
    : base_(HttpUrl(serviceUrl)), npcId_(std::move(npcId)), token_(std::move(token)), memory_(memory),
      keys_(std::move(keys)), pinned_(!keys_.empty()) {
    if (base_.empty()) {
        Fail("serviceUrl: " + Json::Quote(serviceUrl) + " must be an http:// or https:// URL");
        return;
    }
    if (npcId_.empty() || npcId_.find('/') != std::string::npos) {
        Fail("npcId: " + Json::Quote(npcId_) + " must be non-empty text without '/'");
        return;
    }
    record_ = memory_.Get(npcId_);
    if (!record_) {
        Fail("unknown NPC " + Json::Quote(npcId_) + ": the game's memory has no record of it");
        return;
    }
    tape_ = Value::MakeObject();
    tape_.Set("observation", observation);
    tape_.Set("npcState", record_->State.IsObject() ? record_->State : Value::MakeObject());
    tape_.Set("memories", Value::MakeArray());
    tape_.Set("context", context.IsObject() ? context : Value::MakeObject());
    if (!ruleset.empty()) tape_.Set("rulesetId", ruleset);
    outcome_.NpcId = npcId_;
    Step(Value());
}

void DialogueTurn::Fail(const std::string& why) {
    need_ = Need::Failed;
    error_ = why;
}

void DialogueTurn::Step(const Value& lastResult) {
    if (++calls_ > MaxCalls) return Fail("no Finalize after " + std::to_string(MaxCalls) + " calls");
    Value body = Value::MakeObject();
    body.Set("tape", tape_);
    body.Set("lastResult", lastResult);
    call_ = HttpCall();
    call_.Method = "POST";
    call_.Url = base_ + "/npcs/" + UrlEscape(npcId_) + "/process";
    NotCanonical why;
    // canonical: numbers written from their exact digits, so a tape goes back as the service wrote it
    if (!Jcs::Canonical(body, call_.Body, &why)) return Fail("the step cannot be sent: " + why.Message());
    call_.RequestHeaders.emplace_back("content-type", "application/json");
    if (!token_.empty()) call_.RequestHeaders.emplace_back("authorization", "Bearer " + token_);
    call_.MaxBytes = Limits::MaxStepBytes;
    need_ = Need::Send;
}

void DialogueTurn::Answered(int status, const std::string& body, const std::string& error) {
    if (need_ != Need::Send) return;
    if (status == 0)
        return Fail("cannot reach the npcmind service at " + base_ + ": " + error + " (is `npcmind serve` running there?)");
    size_t cap = Limits::For(status, askingKeys_ ? Limits::MaxKeysBytes : Limits::MaxStepBytes);
    if (body.size() > cap)
        return Fail(Limits::TooLarge(call_.Method + " answered " + std::to_string(status), cap,
                                     status >= 400 ? "Limits.MaxErrorBytes"
                                                   : askingKeys_ ? "Limits.MaxKeysBytes" : "Limits.MaxStepBytes"));
    Parsed p = Json::Parse(body);
    if (askingKeys_) {
        askingKeys_ = false;
        if (status != 200 || !p.value["keys"].IsArray())
            return Fail("GET /v1/keys answered " + std::to_string(status) + " without keys: " + Errors::ErrorLine(p.value, ""));
        keys_.clear();
        for (const auto& k : p.value["keys"].Items()) keys_[Errors::Text(k["kid"])] = Errors::Text(k["public_key"]);
        return Verify();
    }
    if (status != 200) return Fail("the service answered " + std::to_string(status) + ": " + Errors::ErrorLine(p.value, body.substr(0, 200)));
    Instruction(p.value);
}

void DialogueTurn::Instruction(const Value& answer) {
    const Value& instruction = answer["instruction"];
    const Value& next = answer["tape"];
    if (!instruction.IsObject() || !next.IsObject() || !instruction["type"].IsString())
        return Fail("the service answered 200 without an instruction and tape: " + Json::Show(answer).substr(0, 200));
    tape_ = next;  // sent back as received, unknown fields (the step token) included
    std::string kind = instruction["type"].AsString();
    outcome_.Steps.push_back(kind);
    if (kind == "Finalize") return Finish(instruction);
    Value result = Value::MakeObject();
    if (kind == "IdentifyActor") {
        Value actor = Value::MakeObject();
        actor.Set("npcId", record_->NpcId);
        actor.Set("persona", record_->Persona);
        actor.Set("data", record_->Data.IsObject() ? record_->Data : Value::MakeObject());
        result.Set("type", "IdentifyActorResult");
        result.Set("actor", actor);
        return Step(result);
    }
    if (kind == "QueryVector") {
        const Value& limit = instruction["limit"];
        const Value& threshold = instruction["threshold"];
        Value memories = Value::MakeArray();
        for (const auto& m : memory_.Recall(npcId_, Errors::Text(instruction["query"]),
                                            limit.IsNumber() ? static_cast<int>(limit.AsNumber()) : 0,
                                            threshold.IsNumber() ? threshold.AsNumber() : 0)) {
            Value one = Value::MakeObject();
            one.Set("text", m.Text);
            one.Set("type", m.Type);
            one.Set("importance", m.Importance);
            one.Set("similarity", m.Similarity);
            memories.Push(one);
        }
        result.Set("type", "QueryVectorResult");
        result.Set("memories", memories);
        return Step(result);
    }
    if (kind == "ExecuteInference") {
        prompt_ = Errors::Text(instruction["prompt"]);
        constraints_ = PromptConstraints::Read(instruction["constraints"]);
        need_ = Need::Infer;
        return;
    }
    Fail("unknown instruction " + Json::Quote(kind));
}

void DialogueTurn::Inferred(const std::string& text) {
    if (need_ != Need::Infer) return;
    Value result = Value::MakeObject();
    result.Set("type", "ExecuteInferenceResult");
    result.Set("generatedOutput", text);
    Step(result);
}

void DialogueTurn::Finish(const Value& fin) {
    outcome_.Valid = fin["valid"].AsBool();
    outcome_.Dialogue = Errors::Text(fin["dialogue"]);
    outcome_.Audit = fin["ruleAudit"].IsObject() ? fin["ruleAudit"] : Value::MakeObject();
    outcome_.Finalize = fin;
    outcome_.Tape = tape_;
    if (!outcome_.Valid) {
        need_ = Need::Done;  // the ruleset's refusal line: nothing to apply or check
        return;
    }
    outcome_.Action = fin["action"];
    outcome_.StateTransform = fin["stateTransform"].IsObject() ? fin["stateTransform"] : Value::MakeObject();
    for (const auto& m : fin["memoryStore"].Items())
        if (m.IsObject())
            outcome_.Memories.push_back(NewMemory{Errors::Text(m["text"]), Errors::Text(m["type"]),
                                                  m["importance"].IsNumber() ? m["importance"].AsNumber() : 0});
    outcome_.Signature = fin["signature"].AsString();
    if (outcome_.Signature.empty())
        return Fail("the service sent a valid outcome without a signature: nothing can check it");
    Value payload;
    NotCanonical why;
    if (!Signing::SignedPayload(npcId_, fin, tape_, payload, &why) || !Jcs::Canonical(payload, outcome_.SignedPayload, &why))
        return Fail("the outcome cannot be checked: its tape has no canonical form (" + why.Message() + ")");
    if (keys_.empty()) return AskKeys();
    Verify();
}

void DialogueTurn::AskKeys() {
    keysFetched_ = true;
    askingKeys_ = true;
    call_ = HttpCall();
    call_.Method = "GET";
    call_.Url = base_ + "/v1/keys";
    if (!token_.empty()) call_.RequestHeaders.emplace_back("authorization", "Bearer " + token_);
    call_.MaxBytes = Limits::MaxKeysBytes;
    need_ = Need::Send;
}

void DialogueTurn::Verify() {
    if (Signing::Verify(outcome_.Signature, outcome_.SignedPayload, keys_)) {
        outcome_.Verified = true;
        need_ = Need::Done;
        return;
    }
    if (!pinned_ && !keysFetched_) return AskKeys();  // a key rotated since they were fetched: asked once more
    Fail("the outcome's signature does not verify with the service's keys (GET /v1/keys): nothing was applied");
}

bool DialogueTurn::Apply(NpcOutcome& outcome) {
    if (!outcome.Valid || !outcome.Verified || outcome.Applied) return false;
    memory_.Apply(outcome.NpcId, outcome.Memories, outcome.StateTransform);
    outcome.Applied = true;
    return true;
}

}  // namespace npcmind
