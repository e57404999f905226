using System.Collections.Generic;
using Godot;
using NpcMind;

// A bee: npcmind's decision when there is one, its own AI otherwise (null: the native AI, never a guess).
// Nothing is allocated per frame: the id, the observation and the legal actions are made once and reused.
public partial class Bee : Node2D
{
    static DecideClient npcmind; static ulong ticked; static int bees; // one client for every bee: the last closes it
    static readonly List<string> Legal = new List<string> { "wander", "chase", "flee" };
    readonly Dictionary<string, object> seen = new Dictionary<string, object>(); // changed in place, never remade
    string id; float told = float.NaN;
    [Export] public float Hp = 1f;

    public override void _Ready()
    {
        id = Name; // a StringName: its text made once
        if (bees++ == 0) npcmind = new DecideClient("http://127.0.0.1:8080", "my-game");
    }

    public override void _Process(double delta)
    {
        if (ticked != Engine.GetProcessFrames()) { ticked = Engine.GetProcessFrames(); npcmind.Tick(); } // never blocks
        if (Hp != told) { told = Hp; seen["hp_fraction"] = (double)Hp; } // boxed when it changes, not every frame
        npcmind.Track(id, "bee", seen, Legal);
        var choice = npcmind.Action(id);
        if (choice == null) Position += Vector2.Right * (float)delta * 50; // its own AI
        else if (choice.Action == "flee") Position += Vector2.Left * (float)delta * 100;
        else if (choice.Action == "chase") Position += Vector2.Right * (float)delta * 100;
    }

    public override void _ExitTree()
    {
        npcmind.Untrack(id);
        if (--bees == 0) { npcmind.Close(); npcmind = null; } // the last bee closes the client
    }
}
