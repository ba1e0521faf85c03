// Lay out a Graphviz DOT graph read from standard input and write it as SVG to standard output.
// With --json, standard input is a JSON array of DOT graphs and the output a JSON array of SVGs (one
// Graphviz load for many drawings: make diagrams and the tests).
//
// Graphviz runs as WebAssembly (npm @hpcc-js/wasm-graphviz, pinned in the project's package.json), so
// no system Graphviz is needed and every machine draws the same picture from the same DOT.
// Exit status: 0 drawn; 2 the DOT is invalid; 3 the package is not installed (message on stderr).
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const PACKAGE = "@hpcc-js/wasm-graphviz";

function locate() {
  // This file's folder first (a checkout: its node_modules), then the working folder (a user's project).
  const require = createRequire(import.meta.url);
  const here = dirname(fileURLToPath(import.meta.url));
  try {
    return require.resolve(PACKAGE, { paths: [here, process.cwd()] });
  } catch {
    return null;
  }
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

const found = locate();
if (found === null) {
  process.stderr.write(`${PACKAGE} is not installed: run npm ci (or npm install --save-dev ${PACKAGE})\n`);
  process.exit(3);
}
const { Graphviz } = await import(pathToFileURL(found).href);
const graphviz = await Graphviz.load();
const batch = process.argv.includes("--json");
const input = await readStdin();
const graphs = batch ? JSON.parse(input) : [input];
const drawings = graphs.map((dot, index) => {
  try {
    return graphviz.dot(dot, "svg");
  } catch (error) {
    const which = batch ? ` (graph ${index})` : "";
    process.stderr.write(`invalid DOT${which}: ${error && error.message ? error.message : error}\n`);
    process.exit(2);
  }
});
process.stdout.write(batch ? JSON.stringify(drawings) : drawings[0]);
