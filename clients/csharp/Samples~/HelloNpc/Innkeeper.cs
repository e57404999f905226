using System.Threading;
using NpcMind;
using UnityEngine;

// Mara: the service writes her prompt, judges her line and signs it; the game keeps her memory and runs the model.
public class Innkeeper : MonoBehaviour
{
    static readonly InMemoryNpcs Npcs = new InMemoryNpcs();
    readonly CancellationTokenSource leaving = new CancellationTokenSource(); // the scene closes: stop her turn
    DialogueClient mind;
    public string said = "";

    void Start()
    {
        Npcs.Register("mara", "Mara, the innkeeper of the Silver Stag. Warm, nosy, afraid of the old mine.");
        var cortex = new OpenAICortex("http://127.0.0.1:11434/v1", "qwen3:4b"); // Ollama; any OpenAI-compatible server
        mind = new DialogueClient("http://127.0.0.1:8080", cortex, Npcs);
    }

    // From the game's dialogue UI: awaited on Unity's main thread, so no frame waits for the model.
    public async void Ask(string observation)
    {
        try
        {
            var outcome = await mind.Process("mara", observation, null, "rpg", leaving.Token);
            said = outcome.Dialogue; // her line, or the ruleset's refusal line
            // outcome.Applied: its signature verified, her memories are kept and her state merged (outcome.State)
        }
        catch (System.OperationCanceledException) { } // the scene closed while she was thinking: nothing applied
        catch (NpcMindException e) { said = "Hm?"; Debug.LogWarning(e.Message); } // service, model or signature: her own line
    }

    void OnDestroy() { leaving.Cancel(); mind.Dispose(); } // aborts her request under way, then closes the client
}
