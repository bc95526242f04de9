// selftest.mjs checks the driver against itself: two ts-mls members create
// a group, exchange a message and commit, and agree on the epoch
// authenticator. `node selftest.mjs` exits non-zero on any disagreement.
import { spawn } from "node:child_process";
import { once } from "node:events";

const child = spawn(process.execPath, [new URL("./driver.mjs", import.meta.url).pathname], {
  stdio: ["pipe", "pipe", "inherit"],
});
let buf = "";
const waiting = [];
child.stdout.on("data", (d) => {
  buf += d;
  for (let i; (i = buf.indexOf("\n")) >= 0; ) {
    const res = JSON.parse(buf.slice(0, i));
    buf = buf.slice(i + 1);
    waiting.shift()(res);
  }
});
let id = 0;
async function call(req) {
  const res = await new Promise((resolve) => {
    waiting.push(resolve);
    child.stdin.write(JSON.stringify({ id: ++id, ...req }) + "\n");
  });
  if (res.error) throw new Error(`${req.op}: ${res.error}`);
  return res;
}
function agree(a, b, what) {
  if (a.epoch !== b.epoch || a.epochAuthenticator !== b.epochAuthenticator) {
    throw new Error(`${what}: members disagree: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
  }
}

const alice = await call({ op: "createGroup", groupId: "0102030405060708", identity: "616c696365" });
const kp = await call({ op: "keyPackage", identity: "626f62" });
const add = await call({ op: "commit", handle: alice.handle, add: [kp.kp], publicMessage: true });
const bob = await call({ op: "join", kpHandle: kp.handle, welcome: add.welcome });
agree(await call({ op: "state", handle: alice.handle }), await call({ op: "state", handle: bob.handle }), "after add");
const msg = await call({ op: "protect", handle: bob.handle, plaintext: "68656c6c6f" });
const got = await call({ op: "process", handle: alice.handle, message: msg.message });
if (got.plaintext !== "68656c6c6f") throw new Error(`application message: got ${got.plaintext}`);
const upd = await call({ op: "commit", handle: bob.handle, publicMessage: false });
await call({ op: "process", handle: alice.handle, message: upd.commit });
agree(await call({ op: "state", handle: alice.handle }), await call({ op: "state", handle: bob.handle }), "after update");
child.stdin.end();
await once(child, "exit");
console.log("1 passed, 0 failed");
