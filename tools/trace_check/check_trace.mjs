// Reads a canis Chrome trace with three readers no one here wrote and prints what they found
// as one JSON object (tests/test_trace_readers.py checks it):
//   schema: ajv against chrome_trace.schema.json (the Trace Event Format, strictly);
//   tracerbench: @tracerbench/trace-model, which nests complete events by containment;
//   devtools: @paulirish/trace_engine, the trace engine of Chrome DevTools' Performance panel.
// Install once with `npm ci` in this folder. Usage: node check_trace.mjs TRACE.json
import fs from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const Ajv = require("ajv");
const { buildModel } = require("@tracerbench/trace-model");

const trace = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const report = {};

// 1. The format, strictly.
const schema = JSON.parse(fs.readFileSync(new URL("chrome_trace.schema.json", import.meta.url)));
const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);
report.schema = {
  valid: validate(trace),
  errors: (validate.errors || []).slice(0, 10).map((e) => `${e.instancePath} ${e.message}`),
};

// Each reader's exception is reported as its result, so a reader that fails says why.
async function reading(read) {
  try {
    return await read();
  } catch (error) {
    return { error: String(error) };
  }
}

// 2. tracerbench: processes, threads, and each stage's parent.
report.tracerbench = await reading(() => {
  const model = buildModel(trace);
  const tb = { processes: [], frames: 0, stages: 0, orphanStages: 0, stagesInNonFrames: 0,
    nestedFrames: 0, instants: 0, counters: {}, transitions: [] };
  for (const proc of model.processes) {
    tb.processes.push({ name: proc.name, threads: proc.threads.map((t) => t.name) });
    for (const thread of proc.threads) {
      for (const event of thread.events) {
        if (event.ph === "i" || event.ph === "I") tb.instants++;
        if (!event.isComplete()) continue;
        if (event.name === "frame") {
          tb.frames++;
          if (event.parent !== undefined) tb.nestedFrames++;
          continue;
        }
        tb.stages++;
        if (event.parent === undefined) tb.orphanStages++;
        else if (event.parent.name !== "frame") tb.stagesInNonFrames++;
        if (event.name === "transition" && event.parent !== undefined) {
          tb.transitions.push({ frame: event.parent.args.frame, dur_us: event.duration,
            frame_dur_us: event.parent.duration });
        }
      }
    }
    for (const event of proc.events) {
      if (event.ph === "C") tb.counters[event.name] = (tb.counters[event.name] || 0) + 1;
    }
  }
  return tb;
});

// 3. Chrome DevTools' trace engine: the per-thread tree the Performance panel draws.
globalThis.DOMRect ??= class DOMRect {
  constructor(x = 0, y = 0, width = 0, height = 0) {
    Object.assign(this, { x, y, width, height, left: x, top: y, right: x + width, bottom: y + height });
  }
};
report.devtools = await reading(async () => {
  const Trace = await import("@paulirish/trace_engine");
  const engine = Trace.TraceModel.Model.createWithAllHandlers();
  await engine.parse(trace.traceEvents);
  const threads = [];
  for (const [, proc] of engine.parsedTrace().data.Renderer.processes) {
    for (const [, thread] of proc.threads) {
      const roots = [...(thread.tree?.roots ?? [])];
      const rootNames = {};
      let children = 0;
      for (const root of roots) {
        rootNames[root.entry.name] = (rootNames[root.entry.name] || 0) + 1;
        children += root.children.length;
      }
      threads.push({ name: thread.name, entries: thread.entries.length, rootNames, children,
        maxDepth: thread.tree?.maxDepth ?? 0 });
    }
  }
  return { threads };
});
process.stdout.write(JSON.stringify(report));
