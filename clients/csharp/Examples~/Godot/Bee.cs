using System.Collections.Generic;
using Godot;
using NpcMind;

// A bee: npcmind's decision when there is one, its own AI otherwise (null: the native AI, never a guess).
public partial class Bee : Node2D
{
    static DecideClient npcmind; static ulong ticked;
    static readonly List<string> Legal = new List<string> { "wander", "chase", "flee" };
    [Export] public float Hp = 1f;

    public override void _Ready() { if (npcmind == null) npcmind = new DecideClient("http://127.0.0.1:8080", "my-game"); }

    public override void _Process(double delta)
    {
        if (ticked != Engine.GetProcessFrames()) { ticked = Engine.GetProcessFrames(); npcmind.Tick(); } // never blocks
        npcmind.Track(Name, "bee", new Dictionary<string, object> { { "hp_fraction", Hp } }, Legal);
        var choice = npcmind.Action(Name);
        if (choice == null) Position += Vector2.Right * (float)delta * 50; // its own AI
        else if (choice.Action == "flee") Position += Vector2.Left * (float)delta * 100;
        else if (choice.Action == "chase") Position += Vector2.Right * (float)delta * 100;
    }

    public override void _ExitTree() { npcmind.Untrack(Name); }
}
