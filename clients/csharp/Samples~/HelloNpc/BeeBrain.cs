using System.Collections.Generic;
using NpcMind;
using UnityEngine;

// A bee: npcmind's decision when there is one, its own AI otherwise (null: the native AI, never a guess).
public class BeeBrain : MonoBehaviour
{
    static DecideClient npcmind; static int ticked = -1;
    static readonly List<string> Legal = new List<string> { "wander", "chase", "flee" };
    public float hp = 1f;

    void Start() { if (npcmind == null) npcmind = new DecideClient("http://127.0.0.1:8080", "my-game"); }

    void Update()
    {
        if (ticked != Time.frameCount) { ticked = Time.frameCount; npcmind.Tick(); } // once a frame; never blocks
        npcmind.Track(name, "bee", new Dictionary<string, object> { { "hp_fraction", hp } }, Legal);
        var choice = npcmind.Action(name);
        if (choice == null) transform.position += Vector3.right * Time.deltaTime; // its own AI
        else if (choice.Action == "flee") transform.position += Vector3.back * Time.deltaTime;
        else if (choice.Action == "chase") transform.position += Vector3.forward * Time.deltaTime;
    }

    void OnDestroy() { npcmind.Untrack(name); }
}
