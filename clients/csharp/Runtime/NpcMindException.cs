// The SDK's errors under one root, as in the Python and TypeScript SDKs (NpcMindError there): a game catches
// NpcMindException for every failure of the SDK and reads Status (the HTTP status, null where no answer came) and
// Code (the protocol's error code, the error body's `error.code`: invalid_request, unauthorized...; null where there
// is none). A signature that does not verify is a SignatureException, not a ServiceException: the service answered
// 200, and what came cannot be trusted.

using System;

namespace NpcMind
{
    /// <summary>Every failure this SDK throws: <see cref="Status"/> the HTTP status of the answer it comes from (null
    /// without one), <see cref="Code"/> the protocol's error code (the error body's <c>error.code</c>; null without
    /// one). A game's own code (its cortex, its memory) may throw one with a message alone.</summary>
    public class NpcMindException : Exception
    {
        /// <summary>The HTTP status of the answer this comes from; null when no answer came.</summary>
        public int? Status { get; private set; }

        /// <summary>The protocol's error code (the error body's <c>error.code</c>, e.g. <c>invalid_request</c>), or
        /// null when there is none.</summary>
        public string Code { get; private set; }

        public NpcMindException(string message, int? status = null, string code = null) : base(message)
        {
            Status = status;
            Code = string.IsNullOrEmpty(code) ? null : code;
        }
    }

    /// <summary>The service refused a request: its answer's <see cref="NpcMindException.Status"/> (4xx, 5xx) and
    /// <see cref="NpcMindException.Code"/>, the message its problems by path.</summary>
    public sealed class ServiceException : NpcMindException
    {
        public ServiceException(string message, int status, string code = null) : base(message, status, code) { }
    }

    /// <summary>The service's answer breaks the protocol: a 200 without an instruction, an unknown instruction or
    /// memory type, no Finalize after <see cref="DialogueClient.MaxCalls"/> calls, keys that are none.</summary>
    public sealed class ProtocolException : NpcMindException
    {
        public ProtocolException(string message, int? status = null, string code = null) : base(message, status, code) { }
    }

    /// <summary>The service cannot be reached, gave no answer in time, or its answer broke off: no status.</summary>
    public sealed class UnreachableException : NpcMindException
    {
        public UnreachableException(string message) : base(message) { }
    }

    /// <summary>An answer past its cap (<see cref="Limits"/>): reading stopped there, and the message names the
    /// cap; <see cref="NpcMindException.Code"/> is <c>answer_too_large</c>.</summary>
    public sealed class TooLargeException : NpcMindException
    {
        /// <summary>The code every SDK gives a body read no further than its cap.</summary>
        internal const string TooLargeCode = "answer_too_large";

        public TooLargeException(string message, int? status = null) : base(message, status, TooLargeCode) { }
    }

    /// <summary>What the game gave cannot be used (an NPC id that is no URL segment, an NPC its memory does not know,
    /// a context JSON cannot carry): nothing was sent.</summary>
    public sealed class InvalidInputException : NpcMindException
    {
        public InvalidInputException(string message) : base(message) { }
    }

    /// <summary>An outcome's signature does not verify (or it has none, or its tape has no canonical form to verify):
    /// nothing was applied. Not a <see cref="ServiceException"/>: the service answered 200; what came cannot be
    /// trusted.</summary>
    public sealed class SignatureException : NpcMindException
    {
        public SignatureException(string message) : base(message) { }
    }
}
