// Validates Amazon States Language definitions with asl-validator (a test tool, never shipped): each path given
// on the command line, one JSON answer a line: {"path", "isValid", "errors"}.
const fs = require("fs");
const validator = require("asl-validator");

for (const path of process.argv.slice(2)) {
  const { isValid, errors } = validator(JSON.parse(fs.readFileSync(path, "utf8")));
  console.log(JSON.stringify({ path, isValid, errors }));
}
