// Dialogue NPCs: the step loop of POST /npcs/{npcId}/process as a machine with no I/O, the game supplying recall
// (INpcMemory) and inference (a cortex: OpenAICortex over the game's HTTP). The service is the mind (next step,
// prompt, judging, signing); the game is the body. The outcome's Ed25519 signature is checked through OpenSSL
// (Signing::Verify) before the turn is done; one that does not verify is refused, and nothing is ever applied by
// the machine: the game calls INpcMemory::Apply (or DialogueTurn::Apply) when it chooses to.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "NpcMindCore/Transport.h"

namespace npcmind {

/// A memory the game recalled for the observation, with how similar it is (0..1).
struct RecalledMemory {
    std::string Text, Type;
    double Importance = 0, Similarity = 0;
};

/// A memory the service asks the game to keep.
struct NewMemory {
    std::string Text, Type;
    double Importance = 0;
};

/// What the game knows of one NPC.
struct NpcRecord {
    std::string NpcId, Persona;
    Value Data = Value::MakeObject();
    Value State = Value::MakeObject();
};

/// The game's memory of its NPCs: who they are, what they recall, and where an outcome is kept.
class INpcMemory {
public:
    virtual ~INpcMemory() = default;
    /// The NPC's record, or nullopt for one the game does not know.
    virtual std::optional<NpcRecord> Get(const std::string& npcId) = 0;
    /// At most `limit` memories at or above `threshold`, most similar first.
    virtual std::vector<RecalledMemory> Recall(const std::string& npcId, const std::string& query, int limit,
                                               double threshold) = 0;
    /// Keep the memories and merge the state patch (a JSON merge patch), both or neither; the new state.
    virtual Value Apply(const std::string& npcId, const std::vector<NewMemory>& memories, const Value& stateTransform) = 0;
};

/// NPCs and their memories in memory (lost when the game ends); recall by shared words. Thread-safe.
class InMemoryNpcs : public INpcMemory {
public:
    /// Add an NPC (or replace who it is); false for an id that is empty or holds '/'.
    bool Register(const std::string& npcId, const std::string& persona, Value data = Value::MakeObject(),
                  Value state = Value::MakeObject());
    std::optional<NpcRecord> Get(const std::string& npcId) override;
    std::vector<RecalledMemory> Recall(const std::string& npcId, const std::string& query, int limit,
                                       double threshold) override;
    Value Apply(const std::string& npcId, const std::vector<NewMemory>& memories, const Value& stateTransform) override;
    /// Everything an NPC remembers, oldest first.
    std::vector<NewMemory> Remembered(const std::string& npcId);

private:
    std::mutex gate_;
    std::map<std::string, NpcRecord> npcs_;
    std::map<std::string, std::vector<NewMemory>> memories_;
};

/// How the service asks the model to answer.
struct PromptConstraints {
    std::optional<int> MaxTokens;
    std::optional<double> Temperature;
    std::vector<std::string> Stop;
    static PromptConstraints Read(const Value& constraints);
};

/// What the game gets back: the line, the action, the rules applied, whether the signature was checked here.
struct NpcOutcome {
    std::string NpcId;
    bool Valid = false;
    std::string Dialogue;
    Value Action, Audit;
    std::vector<std::string> Steps;
    std::vector<NewMemory> Memories;
    Value StateTransform = Value::MakeObject();
    std::string Signature, SignedPayload;
    Value Finalize, Tape;
    bool Verified = false;
    bool Applied = false;
};

/// An OpenAI-compatible chat server (llama.cpp, Ollama, vLLM, a hosted API) as the game's cortex: the call to
/// make for a prompt, and the text of its answer.
struct OpenAICortex {
    std::string Url;  // .../chat/completions
    std::string Model = "local";
    std::string ApiKey;
    double TimeoutMs = 120000;

    /// `baseUrl`: e.g. http://127.0.0.1:11434/v1 for Ollama.
    explicit OpenAICortex(const std::string& baseUrl, std::string model = "local", std::string apiKey = "");
    HttpCall Request(const std::string& prompt, const PromptConstraints& constraints) const;
    /// The model's text, or false with `error` naming the address tried.
    bool Read(int status, const std::string& body, const std::string& transportError, std::string& text,
              std::string& error) const;
};

/// One dialogue turn, step by step, with no I/O: Next says what the game must do (send a call, run inference),
/// and the game gives back what came. Keys are fetched (GET /v1/keys) before the outcome is verified.
class DialogueTurn {
public:
    /// A full run takes four calls; the turn gives up after this many.
    static constexpr int MaxCalls = 8;
    enum class Need { Send, Infer, Done, Failed };

    /// `keys`: the service's public keys pinned (kid -> base64url); empty: fetched from the service.
    DialogueTurn(std::string serviceUrl, std::string npcId, std::string observation, INpcMemory& memory,
                 std::string token = "", std::map<std::string, std::string> keys = {}, Value context = Value(),
                 std::string ruleset = "");
    Need Next() const { return need_; }
    /// The call to send (Need::Send).
    const HttpCall& Call() const { return call_; }
    /// What came back for it (status 0: no answer; `error` says why).
    void Answered(int status, const std::string& body, const std::string& error = "");
    /// The prompt and constraints to run (Need::Infer).
    const std::string& Prompt() const { return prompt_; }
    const PromptConstraints& Constraints() const { return constraints_; }
    /// The model's text (Need::Infer answered).
    void Inferred(const std::string& text);
    /// The cortex failed: the turn fails with that.
    void InferenceFailed(const std::string& error) { Fail(error); }
    /// The outcome (Need::Done): verified when valid.
    const NpcOutcome& Outcome() const { return outcome_; }
    /// Why the turn failed (Need::Failed): nothing was applied.
    const std::string& Error() const { return error_; }
    /// Keep a verified outcome's memories and merge its state (once); false when there is nothing to apply.
    bool Apply(NpcOutcome& outcome);

private:
    void Fail(const std::string& why);
    void Step(const Value& lastResult);
    void Instruction(const Value& answer);
    void Finish(const Value& fin);
    void AskKeys();
    void Verify();

    std::string base_, npcId_, token_;
    INpcMemory& memory_;
    std::map<std::string, std::string> keys_;
    bool pinned_, keysFetched_ = false, askingKeys_ = false;
    Need need_ = Need::Send;
    HttpCall call_;
    Value tape_;
    std::optional<NpcRecord> record_;
    int calls_ = 0;
    std::string prompt_;
    PromptConstraints constraints_;
    NpcOutcome outcome_;
    std::string error_;
};

/// RFC 7396 JSON merge patch: how a Finalize's `stateTransform` changes the NPC's state.
Value MergePatch(const Value& target, const Value& patch);

}  // namespace npcmind
