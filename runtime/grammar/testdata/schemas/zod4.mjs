import * as z from "zod";
const s = z.object({
  email: z.email(), uuid: z.uuid(), guid: z.guid(), url: z.url(), dt: z.iso.datetime(), date: z.iso.date(), time: z.iso.time(), dur: z.iso.duration(),
  ipv4: z.ipv4(), ipv6: z.ipv6(), b64: z.base64(), b64url: z.base64url(), hostname: z.hostname(),
  cuid: z.cuid(), nanoid: z.nanoid(), emoji: z.emoji(), ulid: z.ulid(),
  rec: z.record(z.string(), z.number()), erec: z.record(z.enum(["a","b"]), z.string()),
  mult: z.number().multipleOf(0.5), int: z.int().min(1).max(10), frac: z.number().gt(0.5).lte(99.9),
  str: z.string().min(2).max(524288), arr: z.array(z.string()).max(10000), tuple: z.tuple([z.string(), z.number()]),
  lit: z.literal("x"), nul: z.string().nullable(), opt: z.string().optional(), def: z.number().default(3),
  union: z.union([z.string(), z.number()]), disc: z.discriminatedUnion("k",[z.object({k:z.literal("a"), a:z.string()}), z.object({k:z.literal("b")})]),
  inter: z.intersection(z.object({a:z.string()}), z.object({b:z.number()})),
  regex: z.string().regex(/^[a-z]+$/).startsWith("ab").endsWith("z").includes("q"),
  strict: z.strictObject({a: z.string()}), loose: z.looseObject({a: z.string()}),
});
console.log(JSON.stringify(z.toJSONSchema(s), null, 1));
