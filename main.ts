/** The deployable entry point; wired up by the control-plane work. */
console.log("main.ts: not yet");
