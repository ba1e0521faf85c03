// Lay out a Graphviz DOT graph read from standard input and write it as SVG to standard output.
// With --json, standard input is a JSON array of DOT graphs and the output a JSON array of SVGs (one
// Graphviz load for many drawings: make diagrams and the tests).
// With --png, the SVG is rasterized and the output is a PNG (WIDTH px wide, white background).
//
// Graphviz runs as WebAssembly (npm @hpcc-js/wasm-graphviz) and the rasterizer is resvg (npm
// @resvg/resvg-js, prebuilt for each platform), both pinned in the project's package.json, so no system
// Graphviz is needed and every machine draws the same SVG from the same DOT. A PNG depends on the fonts
// installed too: the same machine gives the same bytes.
// Exit status: 0 drawn; 2 the DOT is invalid; 3 a package is not installed (message on stderr).
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const GRAPHVIZ = "@hpcc-js/wasm-graphviz";
const RESVG = "@resvg/resvg-js";
const PNG_WIDTH = 1600;
// Graphviz writes font-family="Helvetica,sans-Serif"; resvg does not map that generic name to an installed
// font, so the PNG names the usual sans-serif families itself (the SVG is left as Graphviz wrote it).
const GRAPHVIZ_FONTS = 'font-family="Helvetica,sans-Serif"';
const RASTER_FONTS = 'font-family="Helvetica,Arial,Liberation Sans,DejaVu Sans,sans-serif"';

const require = createRequire(import.meta.url);

function locate(name) {
  // This file's folder first (a checkout: its node_modules), then the working folder (a user's project).
  const here = dirname(fileURLToPath(import.meta.url));
  try {
    return require.resolve(name, { paths: [here, process.cwd()] });
  } catch {
    process.stderr.write(`${name} is not installed: run npm ci (or npm install --save-dev ${name})\n`);
    process.exit(3);
  }
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

function rasterize(svg) {
  const { Resvg } = require(locate(RESVG));
  const resvg = new Resvg(svg.replaceAll(GRAPHVIZ_FONTS, RASTER_FONTS), {
    fitTo: { mode: "width", value: PNG_WIDTH },
    background: "white",
    font: { loadSystemFonts: true, defaultFontFamily: "DejaVu Sans", sansSerifFamily: "DejaVu Sans" },
  });
  return resvg.render().asPng();
}

const batch = process.argv.includes("--json");
const png = process.argv.includes("--png");
const found = locate(GRAPHVIZ);
const { Graphviz } = await import(pathToFileURL(found).href);
const graphviz = await Graphviz.load();
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
if (png) {
  process.stdout.write(rasterize(drawings[0]));
} else {
  process.stdout.write(batch ? JSON.stringify(drawings) : drawings[0]);
}
