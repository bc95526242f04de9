// bench.mjs times ts-mls on the operations of regroup's peer benchmark
// (cmd bench-peers), in a group of N members, suite 3:
//
//   create   the creator builds an empty commit, which carries an
//            UpdatePath (createCommit, public message)
//   process  another member processes that commit (processMessage)
//   join     a new member joins from a Welcome that carries the ratchet
//            tree (joinGroup)
//
// The group is built as regroup's side builds it: the creator adds the
// N−1 others in one commit without a path, and one of them joins. Every
// operation runs on the same state each time (ts-mls states are values),
// after one untimed warm-up run.
//
// Usage: node bench.mjs N ITERATIONS
// Output: one JSON line {"n", "create", "process", "join"}, each a list of
// milliseconds, one per iteration.
import { performance } from "node:perf_hooks";
import {
  acceptAll,
  createCommit,
  createGroup,
  defaultCapabilities,
  defaultLifetime,
  emptyPskIndex,
  generateKeyPackage,
  getCiphersuiteFromName,
  getCiphersuiteImpl,
  joinGroup,
  processMessage,
} from "ts-mls";

const suiteName = "MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519";
const impl = await getCiphersuiteImpl(getCiphersuiteFromName(suiteName));

const n = Number(process.argv[2]);
const iterations = Number(process.argv[3]);
if (!(n >= 2) || !(iterations >= 1)) {
  process.stderr.write("usage: node bench.mjs N ITERATIONS\n");
  process.exit(2);
}

const keyPackage = (name) =>
  generateKeyPackage({ credentialType: "basic", identity: new TextEncoder().encode(name) }, defaultCapabilities(), defaultLifetime, [], impl);

async function time(fn) {
  await fn(); // warm-up
  const out = [];
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    await fn();
    out.push(performance.now() - t0);
  }
  return out;
}

const creatorKp = await keyPackage("member-0");
let creator = await createGroup(new TextEncoder().encode("peer-bench"), creatorKp.publicPackage, creatorKp.privatePackage, [], impl);
const kps = [];
for (let i = 1; i < n; i++) kps.push(await keyPackage(`member-${i}`));
const added = await createCommit(
  { state: creator, cipherSuite: impl, pskIndex: emptyPskIndex },
  {
    extraProposals: kps.map((kp) => ({ proposalType: "add", add: { keyPackage: kp.publicPackage } })),
    ratchetTreeExtension: true,
    wireAsPublicMessage: true,
  },
);
creator = added.newState;
const member = await joinGroup(added.welcome, kps[0].publicPackage, kps[0].privatePackage, emptyPskIndex, impl);

const emptyCommit = () =>
  createCommit({ state: creator, cipherSuite: impl, pskIndex: emptyPskIndex }, { extraProposals: [], wireAsPublicMessage: true });
const create = await time(emptyCommit);
const { commit } = await emptyCommit();
const processed = await time(() => processMessage(commit, member, emptyPskIndex, acceptAll, impl));

const joinerKp = await keyPackage("joiner");
const withJoiner = await createCommit(
  { state: creator, cipherSuite: impl, pskIndex: emptyPskIndex },
  {
    extraProposals: [{ proposalType: "add", add: { keyPackage: joinerKp.publicPackage } }],
    ratchetTreeExtension: true,
    wireAsPublicMessage: true,
  },
);
const join = await time(() => joinGroup(withJoiner.welcome, joinerKp.publicPackage, joinerKp.privatePackage, emptyPskIndex, impl));

process.stdout.write(JSON.stringify({ n, create, process: processed, join }) + "\n");
