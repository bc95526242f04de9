// driver.mjs drives ts-mls for regroup's interoperability tests.
//
// It reads one JSON request per line on stdin and writes one JSON response
// per line on stdout. Byte strings are hex. Every request carries an "id"
// that its response repeats; a failed request answers {"id", "error"}.
//
// Requests ("op"):
//   keyPackage  {identity}                 -> {kp, handle}       kp: MLSMessage(KeyPackage)
//   createGroup {groupId, identity}        -> {handle}
//   commit      {handle, add:[kp], remove:[leaf], publicMessage}
//                                          -> {commit, welcome?} MLSMessages;
//                                             ts-mls sends an UpdatePath exactly
//                                             when the commit needs one (empty
//                                             commits, removes, updates)
//   join        {kpHandle, welcome}        -> {handle}
//   process     {handle, message}          -> {kind, plaintext?, active}
//   protect     {handle, plaintext}        -> {message}
//   export      {handle, label, context, length} -> {secret}
//   state       {handle}                   -> {epoch, epochAuthenticator, leaf,
//                                              active, members:[{leaf, identity}]}
import * as readline from "node:readline";
import {
  acceptAll,
  createApplicationMessage,
  createCommit,
  createGroup,
  decodeMlsMessage,
  defaultCapabilities,
  defaultLifetime,
  emptyPskIndex,
  encodeMlsMessage,
  generateKeyPackage,
  getCiphersuiteFromName,
  getCiphersuiteImpl,
  joinGroup,
  mlsExporter,
  processMessage,
} from "ts-mls";

const suiteName = "MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519";
const impl = await getCiphersuiteImpl(getCiphersuiteFromName(suiteName));

const hex = (b) => Buffer.from(b).toString("hex");
const unhex = (s) => new Uint8Array(Buffer.from(s, "hex"));
const decode = (s) => {
  const decoded = decodeMlsMessage(unhex(s), 0);
  if (decoded === undefined) throw new Error("message does not decode");
  return decoded[0];
};

const keyPackages = new Map(); // handle -> {publicPackage, privatePackage}
const states = new Map(); // handle -> ClientState
let nextHandle = 1;
const newHandle = () => String(nextHandle++);

function stateOf(handle) {
  const state = states.get(handle);
  if (state === undefined) throw new Error(`no group state ${handle}`);
  return state;
}

const ops = {
  async keyPackage({ identity }) {
    const credential = { credentialType: "basic", identity: unhex(identity) };
    const kp = await generateKeyPackage(credential, defaultCapabilities(), defaultLifetime, [], impl);
    const handle = newHandle();
    keyPackages.set(handle, kp);
    const msg = { version: "mls10", wireformat: "mls_key_package", keyPackage: kp.publicPackage };
    return { handle, kp: hex(encodeMlsMessage(msg)) };
  },

  async createGroup({ groupId, identity }) {
    const { handle: kpHandle } = await ops.keyPackage({ identity });
    const kp = keyPackages.get(kpHandle);
    const state = await createGroup(unhex(groupId), kp.publicPackage, kp.privatePackage, [], impl);
    const handle = newHandle();
    states.set(handle, state);
    return { handle };
  },

  async commit({ handle, add = [], remove = [], publicMessage = false }) {
    const extraProposals = [
      ...add.map((kp) => ({ proposalType: "add", add: { keyPackage: decode(kp).keyPackage } })),
      ...remove.map((leaf) => ({ proposalType: "remove", remove: { removed: leaf } })),
    ];
    const result = await createCommit(
      { state: stateOf(handle), cipherSuite: impl },
      { extraProposals, ratchetTreeExtension: true, wireAsPublicMessage: publicMessage },
    );
    states.set(handle, result.newState);
    const out = { commit: hex(encodeMlsMessage(result.commit)) };
    if (result.welcome !== undefined) {
      out.welcome = hex(encodeMlsMessage({ version: "mls10", wireformat: "mls_welcome", welcome: result.welcome }));
    }
    return out;
  },

  async join({ kpHandle, welcome }) {
    const kp = keyPackages.get(kpHandle);
    if (kp === undefined) throw new Error(`no key package ${kpHandle}`);
    const state = await joinGroup(decode(welcome).welcome, kp.publicPackage, kp.privatePackage, emptyPskIndex, impl);
    const handle = newHandle();
    states.set(handle, state);
    return { handle };
  },

  async process({ handle, message }) {
    const result = await processMessage(decode(message), stateOf(handle), emptyPskIndex, acceptAll, impl);
    states.set(handle, result.newState);
    const active = result.newState.groupActiveState?.kind ?? "active";
    if (result.kind === "applicationMessage") {
      return { kind: "application", plaintext: hex(result.message), active };
    }
    return { kind: "commit", active };
  },

  async protect({ handle, plaintext }) {
    const result = await createApplicationMessage(stateOf(handle), unhex(plaintext), impl);
    states.set(handle, result.newState);
    const msg = { version: "mls10", wireformat: "mls_private_message", privateMessage: result.privateMessage };
    return { message: hex(encodeMlsMessage(msg)) };
  },

  async export({ handle, label, context, length }) {
    const state = stateOf(handle);
    const secret = await mlsExporter(state.keySchedule.exporterSecret, label, unhex(context), length, impl);
    return { secret: hex(secret) };
  },

  async state({ handle }) {
    const state = stateOf(handle);
    const members = [];
    state.ratchetTree.forEach((node, i) => {
      if (node?.nodeType === "leaf") members.push({ leaf: i / 2, identity: hex(node.leaf.credential.identity) });
    });
    return {
      epoch: state.groupContext.epoch.toString(),
      epochAuthenticator: hex(state.keySchedule.epochAuthenticator),
      leaf: state.privatePath.leafIndex,
      active: state.groupActiveState?.kind ?? "active",
      members,
    };
  },
};

const rl = readline.createInterface({ input: process.stdin, terminal: false });
for await (const line of rl) {
  if (line.trim() === "") continue;
  let req;
  try {
    req = JSON.parse(line);
    const op = ops[req.op];
    if (op === undefined) throw new Error(`unknown op ${req.op}`);
    const res = await op(req);
    process.stdout.write(JSON.stringify({ id: req.id, ...res }) + "\n");
  } catch (err) {
    process.stdout.write(JSON.stringify({ id: req?.id ?? null, error: String(err?.stack ?? err) }) + "\n");
  }
}
