import { Type } from "@sinclair/typebox";
const T = Type.Object({
  id: Type.String({ format: "uuid" }),
  email: Type.String({ format: "email" }),
  when: Type.String({ format: "date-time" }),
  name: Type.String({ minLength: 1, maxLength: 64 }),
  code: Type.String({ pattern: "^[A-Z]{3}-\\d{4}$" }),
  age: Type.Optional(Type.Integer({ minimum: 0, maximum: 150 })),
  ratio: Type.Number({ exclusiveMinimum: 0, maximum: 1 }),
  step: Type.Number({ multipleOf: 0.5 }),
  tags: Type.Array(Type.String(), { maxItems: 10, uniqueItems: false }),
  kind: Type.Union([Type.Literal("a"), Type.Literal("b")]),
  meta: Type.Record(Type.String(), Type.Number()),
  opt: Type.Union([Type.String(), Type.Null()]),
  tuple: Type.Tuple([Type.String(), Type.Number()]),
  nested: Type.Object({ x: Type.Boolean() }, { additionalProperties: false }),
  both: Type.Intersect([Type.Object({ a: Type.String() }), Type.Object({ b: Type.Number() })]),
});
console.log(JSON.stringify(T, null, 1));
