// Exact integer division for safe integers (b > 0). `Math.floor(a / b)` rounds the quotient to a
// double first, which can land on the next integer when a is near 2^53; `%` is exact, and so is
// dividing the exact multiple a - r by b.

export function floorDiv (a: number, b: number): number {
  const r = ((a % b) + b) % b
  return (a - r) / b
}

export function ceilDiv (a: number, b: number): number {
  return -floorDiv(-a, b)
}
