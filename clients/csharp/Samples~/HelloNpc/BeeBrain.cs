using System.Collections.Generic;
using NpcMind;
using NpcMind.Unity;
using UnityEngine;

// A bee: npcmind's decision when there is one, its own AI otherwise (null: the native AI, never a guess).
// Nothing is allocated per frame: the id, the observation and the legal actions are made once and reused.
public class BeeBrain : MonoBehaviour
{
    public NpcMindRunner npcmind; // the scene's runner: one client, ticked once a frame, closed with the scene
    public float hp = 1f;
    static readonly List<string> Legal = new List<string> { "wander", "chase", "flee" };
    readonly Dictionary<string, object> seen = new Dictionary<string, object>(); // changed in place, never remade
    string id; float told = float.NaN;
    void Start() { id = name; } // Unity's `name` makes a new string at each read: read it once

    void Update()
    {
        if (hp != told) { told = hp; seen["hp_fraction"] = (double)hp; } // boxed when it changes, not every frame
        npcmind.Client.Track(id, "bee", seen, Legal);
        var choice = npcmind.Client.Action(id);
        if (choice == null) transform.position += Vector3.right * Time.deltaTime; // its own AI
        else if (choice.Action == "flee") transform.position += Vector3.back * Time.deltaTime;
        else if (choice.Action == "chase") transform.position += Vector3.forward * Time.deltaTime;
    }

    void OnDestroy() { if (npcmind.Client != null) npcmind.Client.Untrack(id); } // the runner closes the client
}
