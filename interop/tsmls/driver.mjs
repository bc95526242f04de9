// driver.mjs drives ts-mls for regroup's interoperability tests.
//
// It reads one JSON request per line on stdin and writes one JSON response
// per line on stdout. Byte strings are hex. Every request carries an "id"
// that its response repeats; a failed request answers {"id", "error"}.
//
// Requests ("op"):
//   keyPackage  {identity}                 -> {kp, handle}       kp: MLSMessage(KeyPackage)
//   createGroup {groupId, identity}        -> {handle}
//   storePsk    {pskId, secret}               -> {} an external PSK, known to every
//                                             member this driver holds
//   commit      {handle, add:[kp], remove:[leaf], psks:[id], publicMessage}
//                                          -> {commit, welcome?} MLSMessages;
//                                             ts-mls sends an UpdatePath exactly
//                                             when the commit needs one (empty
//                                             commits, removes, updates)
//   propose     {handle, add?: kp, remove?: leaf, publicMessage}
//                                          -> {message} a proposal MLSMessage,
//                                             cached for this member's next commit
//   join        {kpHandle, welcome}        -> {handle}
//   process     {handle, message}          -> {kind, plaintext?, active}
//                                             kind: "application" or "handshake"
//                                             (a commit applied or a proposal cached)
//   groupInfo   {handle, native}           -> {groupInfo} MLSMessage with
//                                             external_pub and ratchet_tree
//   externalJoin {groupInfo, identity}     -> {handle, commit} joins by an
//                                             external commit (a PublicMessage)
//
// external_pub: RFC 9420 §12.4.3.2 defines the extension's data as the
// struct ExternalPub { HPKEPublicKey external_pub; }, i.e. the key with its
// opaque<V> length prefix. ts-mls 1.6.4 writes and reads the bare key. The
// groupInfo op therefore re-signs ts-mls's GroupInfo with the RFC encoding
// (unless "native" asks for ts-mls's own), and externalJoin hands ts-mls an
// HPKE whose importPublicKey drops that prefix, so that each side speaks
// the RFC encoding on the wire.
//   reinit      {handle, groupId}          -> {commit} a commit of an inline ReInit
//                                             to groupId in suite 3, no extensions
//   reinitCreate {handle, kpHandle, members:[kp], groupId}
//                                          -> {handle, welcome, ratchetTree} the
//                                             successor of a group suspended by a
//                                             ReInit
//   joinReinit  {handle, kpHandle, welcome} -> {handle}
//   branch      {handle, kpHandle, members:[kp], groupId} -> {handle, welcome, ratchetTree}
//   joinBranch  {handle, kpHandle, welcome} -> {handle}
//   proposeAddExternal {groupInfo, identity} -> {message, kpHandle} a joiner's
//                                             own Add (new_member_proposal)
//   protect     {handle, plaintext, authenticatedData?} -> {message}
//   export      {handle, label, context, length} -> {secret}
//   state       {handle}                   -> {epoch, epochAuthenticator, leaf,
//                                              active, members:[{leaf, identity}]}
import * as readline from "node:readline";
import {
  acceptAll,
  bytesToBase64,
  createApplicationMessage,
  createCommit,
  createProposal,
  createGroup,
  decodeMlsMessage,
  defaultCapabilities,
  defaultLifetime,
  encodeMlsMessage,
  generateKeyPackage,
  getCiphersuiteFromName,
  getCiphersuiteImpl,
  joinGroup,
  joinGroupExternal,
  makePskIndex,
  reinitGroup,
  reinitCreateNewGroup,
  joinGroupFromReinit,
  branchGroup,
  joinGroupFromBranch,
  proposeAddExternal,
  createGroupInfoWithExternalPubAndRatchetTree,
  mlsExporter,
  processMessage,
  processPrivateMessage,
} from "ts-mls";
import { createGroupInfo } from "ts-mls/createCommit.js";
import { encodeRatchetTree } from "ts-mls/ratchetTree.js";

const suiteName = "MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519";
const impl = await getCiphersuiteImpl(getCiphersuiteFromName(suiteName));

// externalPubStruct encodes struct ExternalPub { opaque external_pub<V>; }
// for a key shorter than 64 bytes (a one-byte QUIC varint length).
function externalPubStruct(key) {
  if (key.length >= 64) throw new Error("external_pub key too long for a one-byte length");
  return new Uint8Array([key.length, ...key]);
}

// rfcExternalPubImpl is impl whose importPublicKey also accepts an
// ExternalPub struct (one-byte length prefix, then the key), for ts-mls's
// external join; a bare key of the suite's size passes through.
const rfcExternalPubImpl = {
  ...impl,
  hpke: {
    ...impl.hpke,
    importPublicKey: (k) =>
      impl.hpke.importPublicKey(k.length === 33 && k[0] === 32 ? k.subarray(1) : k),
  },
};

const hex = (b) => Buffer.from(b).toString("hex");
const unhex = (s) => new Uint8Array(Buffer.from(s, "hex"));
const decode = (s) => {
  const decoded = decodeMlsMessage(unhex(s), 0);
  if (decoded === undefined) throw new Error("message does not decode");
  return decoded[0];
};

const externalPsks = {}; // base64(psk_id) -> secret
const pskIndexFor = (state) => makePskIndex(state, externalPsks);
const keyPackages = new Map(); // handle -> {publicPackage, privatePackage}
const states = new Map(); // handle -> ClientState
let nextHandle = 1;
const newHandle = () => String(nextHandle++);

function stateOf(handle) {
  const state = states.get(handle);
  if (state === undefined) throw new Error(`no group state ${handle}`);
  return state;
}

function keyPackageOf(handle) {
  const kp = keyPackages.get(handle);
  if (kp === undefined) throw new Error(`no key package ${handle}`);
  return kp;
}

// successor keeps the new group of a reinit or branch commit and returns
// its handle, Welcome and ratchet tree (ts-mls puts none in the Welcome).
function successor(result) {
  const handle = newHandle();
  states.set(handle, result.newState);
  const welcome = hex(encodeMlsMessage({ version: "mls10", wireformat: "mls_welcome", welcome: result.welcome }));
  return { handle, welcome, ratchetTree: hex(encodeRatchetTree(result.newState.ratchetTree)) };
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

  async storePsk({ pskId, secret }) {
    externalPsks[bytesToBase64(unhex(pskId))] = unhex(secret);
    return {};
  },

  async commit({ handle, add = [], remove = [], psks = [], publicMessage = false }) {
    const extraProposals = [
      ...add.map((kp) => ({ proposalType: "add", add: { keyPackage: decode(kp).keyPackage } })),
      ...remove.map((leaf) => ({ proposalType: "remove", remove: { removed: leaf } })),
      ...psks.map((id) => ({
        proposalType: "psk",
        psk: { preSharedKeyId: { psktype: "external", pskId: unhex(id), pskNonce: impl.rng.randomBytes(impl.kdf.size) } },
      })),
    ];
    const state = stateOf(handle);
    const result = await createCommit(
      { state, cipherSuite: impl, pskIndex: pskIndexFor(state) },
      { extraProposals, ratchetTreeExtension: true, wireAsPublicMessage: publicMessage },
    );
    states.set(handle, result.newState);
    const out = { commit: hex(encodeMlsMessage(result.commit)) };
    if (result.welcome !== undefined) {
      out.welcome = hex(encodeMlsMessage({ version: "mls10", wireformat: "mls_welcome", welcome: result.welcome }));
    }
    return out;
  },

  async propose({ handle, add, remove, publicMessage = false }) {
    const proposal =
      add !== undefined
        ? { proposalType: "add", add: { keyPackage: decode(add).keyPackage } }
        : { proposalType: "remove", remove: { removed: remove } };
    const result = await createProposal(stateOf(handle), publicMessage, proposal, impl);
    states.set(handle, result.newState);
    return { message: hex(encodeMlsMessage(result.message)) };
  },

  async join({ kpHandle, welcome }) {
    const kp = keyPackages.get(kpHandle);
    if (kp === undefined) throw new Error(`no key package ${kpHandle}`);
    const state = await joinGroup(decode(welcome).welcome, kp.publicPackage, kp.privatePackage, pskIndexFor(undefined), impl);
    const handle = newHandle();
    states.set(handle, state);
    return { handle };
  },

  async process({ handle, message }) {
    const state = stateOf(handle);
    const msg = decode(message);
    // ts-mls 1.6.4's processMessage hands PrivateMessages an empty PSK index,
    // so a PSK commit sent encrypted could never be processed: call
    // processPrivateMessage with the real index instead.
    const result =
      msg.wireformat === "mls_private_message"
        ? await processPrivateMessage(state, msg.privateMessage, pskIndexFor(state), impl, acceptAll)
        : await processMessage(msg, state, pskIndexFor(state), acceptAll, impl);
    states.set(handle, result.newState);
    const active = result.newState.groupActiveState?.kind ?? "active";
    if (result.kind === "applicationMessage") {
      return { kind: "application", plaintext: hex(result.message), active };
    }
    return { kind: "handshake", active };
  },

  async groupInfo({ handle, native = false }) {
    const state = stateOf(handle);
    let groupInfo = await createGroupInfoWithExternalPubAndRatchetTree(state, [], impl);
    if (!native) {
      const extensions = groupInfo.extensions.map((e) =>
        e.extensionType === "external_pub" ? { ...e, extensionData: externalPubStruct(e.extensionData) } : e,
      );
      groupInfo = await createGroupInfo(state.groupContext, state.confirmationTag, state, extensions, impl);
    }
    return { groupInfo: hex(encodeMlsMessage({ version: "mls10", wireformat: "mls_group_info", groupInfo })) };
  },

  async externalJoin({ groupInfo, identity }) {
    const credential = { credentialType: "basic", identity: unhex(identity) };
    const kp = await generateKeyPackage(credential, defaultCapabilities(), defaultLifetime, [], impl);
    const gi = decode(groupInfo).groupInfo;
    const { publicMessage, newState } = await joinGroupExternal(gi, kp.publicPackage, kp.privatePackage, false, rfcExternalPubImpl);
    const handle = newHandle();
    states.set(handle, newState);
    const msg = { version: "mls10", wireformat: "mls_public_message", publicMessage };
    return { handle, commit: hex(encodeMlsMessage(msg)) };
  },

  async reinit({ handle, groupId }) {
    const result = await reinitGroup(stateOf(handle), unhex(groupId), "mls10", suiteName, [], impl);
    states.set(handle, result.newState);
    return { commit: hex(encodeMlsMessage(result.commit)) };
  },

  async reinitCreate({ handle, kpHandle, members, groupId }) {
    const kp = keyPackageOf(kpHandle);
    const kps = members.map((m) => decode(m).keyPackage);
    const result = await reinitCreateNewGroup(stateOf(handle), kp.publicPackage, kp.privatePackage, kps, unhex(groupId), suiteName, []);
    return successor(result);
  },

  async joinReinit({ handle, kpHandle, welcome }) {
    const kp = keyPackageOf(kpHandle);
    const state = await joinGroupFromReinit(stateOf(handle), decode(welcome).welcome, kp.publicPackage, kp.privatePackage, undefined);
    const h = newHandle();
    states.set(h, state);
    return { handle: h };
  },

  async branch({ handle, kpHandle, members, groupId }) {
    const kp = keyPackageOf(kpHandle);
    const kps = members.map((m) => decode(m).keyPackage);
    return successor(await branchGroup(stateOf(handle), kp.publicPackage, kp.privatePackage, kps, unhex(groupId), impl));
  },

  async joinBranch({ handle, kpHandle, welcome }) {
    const kp = keyPackageOf(kpHandle);
    const state = await joinGroupFromBranch(stateOf(handle), decode(welcome).welcome, kp.publicPackage, kp.privatePackage, undefined, impl);
    const h = newHandle();
    states.set(h, state);
    return { handle: h };
  },

  async proposeAddExternal({ groupInfo, identity }) {
    const { handle: kpHandle } = await ops.keyPackage({ identity });
    const kp = keyPackageOf(kpHandle);
    const msg = await proposeAddExternal(decode(groupInfo).groupInfo, kp.publicPackage, kp.privatePackage, impl);
    return { message: hex(encodeMlsMessage(msg)), kpHandle };
  },

  async protect({ handle, plaintext, authenticatedData = "" }) {
    const result = await createApplicationMessage(stateOf(handle), unhex(plaintext), impl, unhex(authenticatedData));
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
