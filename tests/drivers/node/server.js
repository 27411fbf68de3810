// The server a driver program talks to: `--host H` (127.0.0.1) and
// `--port P` from its command line; a missing or bad port stops it.

'use strict';

const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : fallback;
};
const host = arg('--host', '127.0.0.1');
const port = Number(arg('--port'));
if (!Number.isInteger(port) || port <= 0) {
  console.error(`usage: node ${require('node:path').basename(process.argv[1])} [--host H] --port P`);
  process.exit(2);
}

module.exports = { host, port };
