// Minimal float quaternion/vector helpers for the native core. The Python side's
// vectorised equivalents live in runtime/rotations.py; tests check both agree.
#pragma once

#include <cmath>

namespace canis {

struct Vec3 {
    float x, y, z;
};

struct Quat {
    float w, x, y, z;
};

inline Vec3 operator+(Vec3 a, Vec3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
inline Vec3 operator-(Vec3 a, Vec3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
inline Vec3 operator*(Vec3 a, float s) { return {a.x * s, a.y * s, a.z * s}; }
inline float dot(Vec3 a, Vec3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
inline Vec3 cross(Vec3 a, Vec3 b) {
    return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
inline float length(Vec3 a) { return std::sqrt(dot(a, a)); }

inline Quat operator*(Quat a, Quat b) {
    return {a.w * b.w - a.x * b.x - a.y * b.y - a.z * b.z,
            a.w * b.x + a.x * b.w + a.y * b.z - a.z * b.y,
            a.w * b.y - a.x * b.z + a.y * b.w + a.z * b.x,
            a.w * b.z + a.x * b.y - a.y * b.x + a.z * b.w};
}
inline Quat conjugate(Quat q) { return {q.w, -q.x, -q.y, -q.z}; }
inline Quat normalized(Quat q) {
    float n = std::sqrt(q.w * q.w + q.x * q.x + q.y * q.y + q.z * q.z);
    return {q.w / n, q.x / n, q.y / n, q.z / n};
}

// v' = v + 2w (u x v) + 2 u x (u x v), u the vector part: cheaper than building a matrix.
inline Vec3 rotate(Quat q, Vec3 v) {
    Vec3 u{q.x, q.y, q.z};
    Vec3 t = cross(u, v) * 2.0f;
    return v + t * q.w + cross(u, t);
}

inline Quat from_axis_angle(Vec3 unit_axis, float angle_rad) {
    float s = std::sin(0.5f * angle_rad);
    return {std::cos(0.5f * angle_rad), unit_axis.x * s, unit_axis.y * s, unit_axis.z * s};
}

inline Vec3 load3(const float* p) { return {p[0], p[1], p[2]}; }
inline Quat load4(const float* p) { return {p[0], p[1], p[2], p[3]}; }
inline void store3(float* p, Vec3 v) { p[0] = v.x; p[1] = v.y; p[2] = v.z; }
inline void store4(float* p, Quat q) { p[0] = q.w; p[1] = q.x; p[2] = q.y; p[3] = q.z; }

}  // namespace canis
