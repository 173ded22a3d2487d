/** A bad parameter or input: `parameter` names it (e.g. `"epsilon"`, `"matrix[1][0]"`). */
export class LdpClientError extends Error {
  readonly parameter: string;

  constructor(parameter: string, value: unknown, expected: string) {
    super(`${parameter} = ${describe(value)}: expected ${expected}`);
    this.name = "LdpClientError";
    this.parameter = parameter;
  }
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `an array of ${value.length}`;
  return String(value);
}
