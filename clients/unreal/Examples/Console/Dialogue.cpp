// One dialogue NPC through a real service, run by tests/test_unreal.py (the C# SDK's Examples~/Console/Dialogue.cs
// is its twin): DialogueTurn driven over libcurl, the cortex an OpenAI-compatible server, Mara's memory in memory.
// Prints one JSON line: the outcome as a game gets it, and what its game server would check.
//   npcmind_dialogue SERVICE CORTEX turn    Mara answers a traveller (twice: her applied state goes back)
//   npcmind_dialogue SERVICE CORTEX forge   Mara's signed line changed on its way to the game: refused
#include <cstdio>
#include <string>

#include "CurlSender.h"
#include "NpcMindCore/Npc.h"

using namespace npcmind;

namespace {

/// Mara's Finalize line changed on its way back (a proxy between the service and the game).
std::string Forged(const std::string& body) {
    Parsed p = Json::Parse(body);
    Value instruction = p.value["instruction"];
    if (instruction["type"].AsString() != "Finalize" || !instruction["valid"].AsBool()) return body;
    instruction.Set("dialogue", instruction["dialogue"].AsString() + " And the room is free.");
    return Json::Show(p.value);
}

/// One turn to its end: the service's steps over curl, the cortex's inference over curl.
DialogueTurn::Need Run(DialogueTurn& turn, CurlSender& http, const OpenAICortex& cortex, bool forge) {
    while (true) {
        auto need = turn.Next();
        if (need == DialogueTurn::Need::Send) {
            std::string body, error;
            int status = http.Perform(turn.Call(), body, error);
            turn.Answered(status, forge ? Forged(body) : body, error);
        } else if (need == DialogueTurn::Need::Infer) {
            std::string body, error, text;
            int status = http.Perform(cortex.Request(turn.Prompt(), turn.Constraints()), body, error);
            if (cortex.Read(status, body, error, text, error)) turn.Inferred(text);
            else turn.InferenceFailed(error);
        } else {
            return need;
        }
    }
}

Value Shown(const NpcOutcome& o) {
    Value v = Value::MakeObject();
    v.Set("valid", o.Valid);
    v.Set("verified", o.Verified);
    v.Set("applied", o.Applied);
    v.Set("dialogue", o.Dialogue);
    v.Set("action", o.Action);
    v.Set("steps", Value::Strings(o.Steps));
    v.Set("signature", o.Signature.empty() ? Value() : Value(o.Signature));
    v.Set("signed_payload", o.SignedPayload.empty() ? Value() : Value(o.SignedPayload));
    Value server = Value::MakeObject();
    server.Set("npcId", o.NpcId);
    server.Set("finalize", o.Finalize);
    server.Set("tape", o.Tape);
    v.Set("for_server", server);
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: npcmind_dialogue SERVICE CORTEX turn|forge\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    std::string service = argv[1], mode = argv[3];
    InMemoryNpcs npcs;
    Value data = Value::MakeObject();
    data.Set("inn", "Silver Stag");
    data.Set("gold", 12);
    npcs.Register("mara", "Mara, the innkeeper of the Silver Stag. Warm, nosy, afraid of the old mine.", data);
    OpenAICortex cortex(argv[2], "scripted");
    CurlSender http;
    Value report = Value::MakeObject();
    DialogueTurn first(service, "mara", "A traveller with a lantern asks about the old mine.", npcs);
    if (Run(first, http, cortex, mode == "forge") == DialogueTurn::Need::Failed) {
        report.Set("refused", first.Error());
    } else {
        NpcOutcome outcome = first.Outcome();
        report.Set("first", Shown(outcome));
        if (first.Apply(outcome)) {
            report.Set("applied", Shown(outcome));
            DialogueTurn second(service, "mara", "The traveller asks again about the mine.", npcs);
            if (Run(second, http, cortex, false) == DialogueTurn::Need::Done) report.Set("second", Shown(second.Outcome()));
            else report.Set("refused", second.Error());
        }
    }
    report.Set("memories", static_cast<int>(npcs.Remembered("mara").size()));
    report.Set("state", npcs.Get("mara")->State);
    std::printf("%s\n", Json::Show(report).c_str());
    return 0;
}
