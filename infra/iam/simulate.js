// Evaluates IAM requests with @cloud-copilot/iam-simulate (AGPL: a test tool run in its own process, never shipped).
// stdin: a JSON list of {"id", "simulation"}; stdout: a JSON list of {"id", "result", "allowedBy", "deniedBy",
// "errors"}, where allowedBy/deniedBy name the deciding statements as "<policy>#<statement id or index>".
// A case with "unsafe": true skips the simulator's validation of the resource against the service's published resource
// types (see evaluate.py UNLISTED_RESOURCE_TYPES); its deciding statement is found by evaluating each alone.
const { runSimulation, runUnsafeSimulation } = require("@cloud-copilot/iam-simulate");

function unsafe(id, simulation) {
  const result = runUnsafeSimulation(simulation, {});
  const allowedBy = [];
  if (result === "Allowed") {
    for (const { name, policy } of simulation.identityPolicies) {
      for (const statement of policy.Statement) {
        const alone = { ...simulation, identityPolicies: [{ name, policy: { ...policy, Statement: [statement] } }] };
        if (runUnsafeSimulation(alone, {}) === "Allowed") allowedBy.push(`identity:${name}#${statement.Sid}`);
      }
    }
  }
  return { id, result, allowedBy, deniedBy: [], errors: null };
}

function statements(analysis, key) {
  const found = [];
  for (const part of ["identityAnalysis", "resourceAnalysis", "sessionAnalysis"]) {
    const section = analysis && analysis[part];
    for (const statement of (section && section[key]) || []) {
      found.push(`${part.replace("Analysis", "")}:${statement.policyId || ""}#${statement.statementId || statement.explain?.identifier || "?"}`);
    }
  }
  return found;
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const cases = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const answers = [];
  for (const { id, simulation, unsafe: skipValidation } of cases) {
    if (skipValidation) {
      answers.push(unsafe(id, simulation));
      continue;
    }
    const response = await runSimulation(simulation, {});
    if (response.resultType === "error") {
      answers.push({ id, result: "Error", allowedBy: [], deniedBy: [], errors: response.errors });
      continue;
    }
    const analysis = response.resultType === "single" ? response.result.analysis : response.results[0]?.analysis;
    answers.push({
      id,
      result: response.overallResult,
      allowedBy: statements(analysis, "allowStatements"),
      deniedBy: statements(analysis, "denyStatements"),
      errors: null,
    });
  }
  process.stdout.write(JSON.stringify(answers));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
