// apps/water/water.cpp: molecular dynamics of water, SPLASH Water n-squared style (PARMACS).
//
// What is kept from SPLASH-2 Water-Nsquared: three-site molecules (O, H, H) in a periodic cubic
// box; intra-molecular forces per molecule; inter-molecular forces over all pairs with a spherical
// cutoff at half the box on the O-O distance (minimum image, the molecule moved whole); each
// molecule interacts with the next n/2 molecules cyclically, so every pair is computed once;
// a thread sums its pair forces into a private array and then adds them into the shared forces
// under one lock per molecule; energies are reduced under a lock; a Gear predictor-corrector
// integrates, with a barrier between the phases of a step (predict + intra, inter, correct).
// What is simplified: the force field is flexible SPC (harmonic O-H bonds and H-O-H angle,
// Lennard-Jones between oxygens, Coulomb between all nine site pairs) instead of MCY, and the
// corrector carries 4 values (Gear order 3) instead of 6. Units: angstrom, picosecond, amu.
//
// Molecules are split in contiguous blocks, one a thread: a thread predicts, corrects and computes
// intra-molecular forces only for its own molecules (its own pages); only the locked force adds
// write elsewhere. Checked against the same steps run sequentially (same functions, one thread).
#include "parmacs.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "app_common.hpp"

MAIN_ENV

namespace {

constexpr int kMaxSteps = 16;
constexpr int kMolLocks = 1024;  // molecule j's forces are under lock j % kMolLocks (SPLASH's MAXLCKS)

// Flexible SPC (energies converted from kcal/mol: 1 kcal/mol = 418.4 amu A^2/ps^2).
constexpr double kKcal = 418.4;
constexpr double kMass[3] = {15.9994, 1.008, 1.008};
constexpr double kCharge[3] = {-0.82, 0.41, 0.41};
constexpr double kCoulomb = 332.0636 * kKcal;  // e^2 / (4 pi eps0) in amu A^3 / ps^2
constexpr double kLjEps = 0.1553 * kKcal;
constexpr double kLjSigma = 3.166;
constexpr double kBondK = 1059.162 * kKcal;  // U = k/2 (r - r0)^2
constexpr double kBondR0 = 1.0;
constexpr double kAngleK = 75.90 * kKcal;  // U = k/2 (theta - theta0)^2
constexpr double kAngleTheta0 = 109.47 * 3.14159265358979323846 / 180.0;
constexpr double kDt = 0.0005;  // ps (0.5 fs: the O-H stretch is flexible)
constexpr double kDensity = 0.0334;  // molecules / A^3 (liquid water)

// Gear corrector coefficients, 4 values, second-order equation (Allen & Tildesley, Table E.2).
constexpr double kGear[4] = {1.0 / 6.0, 5.0 / 6.0, 1.0, 1.0 / 3.0};

// r[k] is the k-th scaled derivative of the positions: r[0] position, r[1] = h v, r[2] = h^2/2 a,
// r[3] = h^3/6 da/dt; [atom][dim], atom 0 = O.
struct Mol {
    double r[4][3][3];
    double f[3][3];
};

struct GlobalMemory {
    BARDEC(barrier);
    LOCKDEC(energy_lock);
    ALOCKDEC(mol_lock, kMolLocks);
    double epot[kMaxSteps + 1];  // potential energy at each force evaluation (0 = initial)
    double ekin[kMaxSteps + 1];  // kinetic energy after each correction (0 = initial)
    unsigned long start, end;
};

GlobalMemory* gl;
Mol* mols;
long nmol;
int nsteps;
double box, cutoff;
int nprocs;

void init_molecules(Mol* m, long n, double L) {
    apps::Rng rng(0x3a7e5);
    long k = 1;
    while (k * k * k < n) ++k;
    double spacing = L / static_cast<double>(k);
    // Equilibrium geometry in the molecule's frame.
    double hx = kBondR0 * std::sin(kAngleTheta0 / 2), hy = kBondR0 * std::cos(kAngleTheta0 / 2);
    const double local[3][3] = {{0, 0, 0}, {hx, hy, 0}, {-hx, hy, 0}};
    for (long i = 0; i < n; ++i) {
        Mol& mol = m[i];
        double o[3] = {(static_cast<double>(i % k) + 0.5) * spacing + rng.uniform(-0.1, 0.1),
                       (static_cast<double>((i / k) % k) + 0.5) * spacing + rng.uniform(-0.1, 0.1),
                       (static_cast<double>(i / (k * k)) + 0.5) * spacing + rng.uniform(-0.1, 0.1)};
        // A uniformly random rotation (Shoemake's unit quaternion).
        double u1 = rng.uniform(), u2 = 2 * 3.14159265358979323846 * rng.uniform(),
               u3 = 2 * 3.14159265358979323846 * rng.uniform();
        double qw = std::sqrt(1 - u1) * std::sin(u2), qx = std::sqrt(1 - u1) * std::cos(u2),
               qy = std::sqrt(u1) * std::sin(u3), qz = std::sqrt(u1) * std::cos(u3);
        const double R[3][3] = {{1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qz * qw), 2 * (qx * qz + qy * qw)},
                                {2 * (qx * qy + qz * qw), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qx * qw)},
                                {2 * (qx * qz - qy * qw), 2 * (qy * qz + qx * qw), 1 - 2 * (qx * qx + qy * qy)}};
        double v[3] = {rng.uniform(-5, 5), rng.uniform(-5, 5), rng.uniform(-5, 5)};  // A/ps, whole molecule
        for (int a = 0; a < 3; ++a)
            for (int d = 0; d < 3; ++d) {
                double p = o[d];
                for (int e = 0; e < 3; ++e) p += R[d][e] * local[a][e];
                mol.r[0][a][d] = p;
                mol.r[1][a][d] = kDt * v[d];
                mol.r[2][a][d] = 0;
                mol.r[3][a][d] = 0;
                mol.f[a][d] = 0;
            }
    }
}

void predict(Mol* m, long lo, long hi) {
    for (long i = lo; i < hi; ++i)
        for (int a = 0; a < 3; ++a)
            for (int d = 0; d < 3; ++d) {
                double* r[4] = {&m[i].r[0][a][d], &m[i].r[1][a][d], &m[i].r[2][a][d], &m[i].r[3][a][d]};
                *r[0] += *r[1] + *r[2] + *r[3];
                *r[1] += 2 * *r[2] + 3 * *r[3];
                *r[2] += 3 * *r[3];
            }
}

// Sets the forces of molecules [lo, hi) to their intra-molecular forces; adds the energy to epot.
void intra_forces(Mol* m, long lo, long hi, double& epot) {
    for (long i = lo; i < hi; ++i) {
        Mol& mol = m[i];
        double u[2][3], len[2];
        for (int h = 0; h < 2; ++h) {
            for (int d = 0; d < 3; ++d) u[h][d] = mol.r[0][h + 1][d] - mol.r[0][0][d];
            len[h] = std::sqrt(u[h][0] * u[h][0] + u[h][1] * u[h][1] + u[h][2] * u[h][2]);
        }
        for (int a = 0; a < 3; ++a)
            for (int d = 0; d < 3; ++d) mol.f[a][d] = 0;
        for (int h = 0; h < 2; ++h) {  // bonds
            double s = len[h] - kBondR0;
            epot += 0.5 * kBondK * s * s;
            for (int d = 0; d < 3; ++d) {
                double fd = -kBondK * s * u[h][d] / len[h];
                mol.f[h + 1][d] += fd;
                mol.f[0][d] -= fd;
            }
        }
        double cosT = (u[0][0] * u[1][0] + u[0][1] * u[1][1] + u[0][2] * u[1][2]) / (len[0] * len[1]);
        double theta = std::acos(cosT);
        double sinT = std::sin(theta);
        double dth = theta - kAngleTheta0;
        epot += 0.5 * kAngleK * dth * dth;
        double c = kAngleK * dth / sinT;  // F_H = c * d(cos theta)/du
        for (int h = 0; h < 2; ++h) {
            int o = 1 - h;
            for (int d = 0; d < 3; ++d) {
                double fd = c * (u[o][d] / (len[0] * len[1]) - cosT * u[h][d] / (len[h] * len[h]));
                mol.f[h + 1][d] += fd;
                mol.f[0][d] -= fd;
            }
        }
    }
}

// Pair forces of molecules [lo, hi) with the next n/2 molecules (cyclic), added into acc
// (n x 9: [mol][atom*3 + dim]); adds the pair energy to epot. Reads positions only.
void inter_forces(const Mol* m, long n, long lo, long hi, double* acc, double& epot) {
    const double rc2 = cutoff * cutoff;
    for (long i = lo; i < hi; ++i) {
        long partners = (n - 1) / 2 + ((n % 2 == 0 && i < n / 2) ? 1 : 0);
        for (long s = 1; s <= partners; ++s) {
            long j = (i + s) % n;
            double shift[3], dOO[3], r2 = 0;
            for (int d = 0; d < 3; ++d) {
                double dd = m[j].r[0][0][d] - m[i].r[0][0][d];
                shift[d] = -box * std::nearbyint(dd / box);
                dOO[d] = dd + shift[d];
                r2 += dOO[d] * dOO[d];
            }
            if (r2 > rc2) continue;
            // Lennard-Jones, O-O.
            double sr2 = kLjSigma * kLjSigma / r2, sr6 = sr2 * sr2 * sr2;
            epot += 4 * kLjEps * (sr6 * sr6 - sr6);
            double flj = 24 * kLjEps * (2 * sr6 * sr6 - sr6) / r2;
            for (int d = 0; d < 3; ++d) {
                acc[j * 9 + d] += flj * dOO[d];
                acc[i * 9 + d] -= flj * dOO[d];
            }
            // Coulomb, all nine site pairs.
            for (int a = 0; a < 3; ++a)
                for (int b = 0; b < 3; ++b) {
                    double rv[3], q2 = 0;
                    for (int d = 0; d < 3; ++d) {
                        rv[d] = m[j].r[0][b][d] + shift[d] - m[i].r[0][a][d];
                        q2 += rv[d] * rv[d];
                    }
                    double rinv = 1 / std::sqrt(q2);
                    double kq = kCoulomb * kCharge[a] * kCharge[b];
                    epot += kq * rinv;
                    double fc = kq * rinv * rinv * rinv;
                    for (int d = 0; d < 3; ++d) {
                        acc[j * 9 + b * 3 + d] += fc * rv[d];
                        acc[i * 9 + a * 3 + d] -= fc * rv[d];
                    }
                }
        }
    }
}

double kinetic(const Mol& mol) {
    double e = 0;
    for (int a = 0; a < 3; ++a)
        for (int d = 0; d < 3; ++d) {
            double v = mol.r[1][a][d] / kDt;
            e += 0.5 * kMass[a] * v * v;
        }
    return e;
}

// Step 0: the derivatives start from the initial forces.
void init_derivatives(Mol* m, long lo, long hi, double& ekin) {
    for (long i = lo; i < hi; ++i) {
        for (int a = 0; a < 3; ++a)
            for (int d = 0; d < 3; ++d) m[i].r[2][a][d] = 0.5 * kDt * kDt * m[i].f[a][d] / kMass[a];
        ekin += kinetic(m[i]);
    }
}

void correct(Mol* m, long lo, long hi, double& ekin) {
    for (long i = lo; i < hi; ++i) {
        for (int a = 0; a < 3; ++a)
            for (int d = 0; d < 3; ++d) {
                double delta = 0.5 * kDt * kDt * m[i].f[a][d] / kMass[a] - m[i].r[2][a][d];
                for (int k = 0; k < 4; ++k) m[i].r[k][a][d] += kGear[k] * delta;
            }
        ekin += kinetic(m[i]);
    }
}

// The same steps on one thread: the reference.
void run_sequential(Mol* m, long n, double* epot, double* ekin) {
    std::vector<double> acc(n * 9);
    for (int step = 0; step <= nsteps; ++step) {
        epot[step] = ekin[step] = 0;
        if (step > 0) predict(m, 0, n);
        intra_forces(m, 0, n, epot[step]);
        std::fill(acc.begin(), acc.end(), 0.0);
        inter_forces(m, n, 0, n, acc.data(), epot[step]);
        for (long j = 0; j < n; ++j)
            for (int k = 0; k < 9; ++k) m[j].f[k / 3][k % 3] += acc[j * 9 + k];
        if (step == 0)
            init_derivatives(m, 0, n, ekin[step]);
        else
            correct(m, 0, n, ekin[step]);
    }
}

// Potential energy of a configuration and the forces on it (f of every molecule), one thread.
double potential_and_forces(Mol* m, long n) {
    double e = 0;
    std::vector<double> acc(n * 9, 0.0);
    intra_forces(m, 0, n, e);
    inter_forces(m, n, 0, n, acc.data(), e);
    for (long j = 0; j < n; ++j)
        for (int k = 0; k < 9; ++k) m[j].f[k / 3][k % 3] += acc[j * 9 + k];
    return e;
}

// Forces must be minus the gradient of the potential: central differences on a few atoms of the
// initial configuration. Returns {analytic, numeric} force components.
std::pair<std::vector<double>, std::vector<double>> gradient_check(long n) {
    std::vector<Mol> m(n);
    init_molecules(m.data(), n, box);
    potential_and_forces(m.data(), n);
    const long sel_mol[3] = {0, 1, n / 2};
    const int sel_atom[3] = {0, 1, 2};
    const double h = 1e-5;
    std::vector<double> analytic, numeric;
    for (int s = 0; s < 3; ++s)
        for (int d = 0; d < 3; ++d) {
            analytic.push_back(m[sel_mol[s]].f[sel_atom[s]][d]);
            std::vector<Mol> p = m;
            p[sel_mol[s]].r[0][sel_atom[s]][d] += h;
            double ep = potential_and_forces(p.data(), n);
            p[sel_mol[s]].r[0][sel_atom[s]][d] -= 2 * h;
            double em = potential_and_forces(p.data(), n);
            numeric.push_back(-(ep - em) / (2 * h));
        }
    return {analytic, numeric};
}

}  // namespace

void Worker(void) {
    int pid;
    GET_PID(pid);
    apps::Range r = apps::block_range(nmol, nprocs, pid);
    std::vector<double> acc(nmol * 9);  // private pair-force sums (SPLASH's PFORCES)

    BARRIER(gl->barrier, nprocs);
    if (pid == 0) {
        SPLASH3_ROI_BEGIN();
        CLOCK(gl->start);
    }
    BARRIER(gl->barrier, nprocs);  // no thread starts before the clock does
    for (int step = 0; step <= nsteps; ++step) {
        double epot = 0, ekin = 0;
        if (step > 0) predict(mols, r.lo, r.hi);
        intra_forces(mols, r.lo, r.hi, epot);
        BARRIER(gl->barrier, nprocs);  // all positions predicted, all forces reset

        std::fill(acc.begin(), acc.end(), 0.0);
        inter_forces(mols, nmol, r.lo, r.hi, acc.data(), epot);
        for (long j = 0; j < nmol; ++j) {
            const double* aj = &acc[j * 9];
            bool touched = false;
            for (int k = 0; k < 9; ++k) touched |= aj[k] != 0;
            if (!touched) continue;
            ALOCK(gl->mol_lock, j % kMolLocks);
            for (int k = 0; k < 9; ++k) mols[j].f[k / 3][k % 3] += aj[k];
            AULOCK(gl->mol_lock, j % kMolLocks);
        }
        BARRIER(gl->barrier, nprocs);  // all forces complete

        if (step == 0)
            init_derivatives(mols, r.lo, r.hi, ekin);
        else
            correct(mols, r.lo, r.hi, ekin);
        LOCK(gl->energy_lock);
        gl->epot[step] += epot;
        gl->ekin[step] += ekin;
        UNLOCK(gl->energy_lock);
    }
    BARRIER(gl->barrier, nprocs);
    if (pid == 0) {
        CLOCK(gl->end);
        SPLASH3_ROI_END();
    }
}

int main(int argc, char** argv) {
    MAIN_INITENV();
    apps::Options opt = apps::parse_args(
        "water", "Water n-squared molecular dynamics (flexible SPC, Gear predictor-corrector), molecules by thread.",
        argc, argv);
    nprocs = opt.nprocs;
    nmol = opt.size == apps::Size::paper ? 343 : 64;
    nsteps = 2;
    box = std::cbrt(static_cast<double>(nmol) / kDensity);
    cutoff = box / 2;

    gl = static_cast<GlobalMemory*>(G_MALLOC_F(sizeof(GlobalMemory)));
    BARINIT(gl->barrier, nprocs);
    LOCKINIT(gl->energy_lock);
    ALOCKINIT(gl->mol_lock, kMolLocks);
    for (int s = 0; s <= kMaxSteps; ++s) gl->epot[s] = gl->ekin[s] = 0;
    mols = static_cast<Mol*>(G_MALLOC_F(sizeof(Mol) * nmol));
    init_molecules(mols, nmol, box);

    CREATE(Worker, nprocs);
    WAIT_FOR_END(nprocs);

    if (opt.inject_error) mols[nmol / 2].r[0][0][0] += 1.0;

    std::vector<Mol> ref(nmol);
    init_molecules(ref.data(), nmol, box);
    std::vector<double> epot(nsteps + 1), ekin(nsteps + 1);
    run_sequential(ref.data(), nmol, epot.data(), ekin.data());

    std::vector<double> pos, vel, rpos, rvel;
    for (long i = 0; i < nmol; ++i)
        for (int a = 0; a < 3; ++a)
            for (int d = 0; d < 3; ++d) {
                pos.push_back(mols[i].r[0][a][d]);
                vel.push_back(mols[i].r[1][a][d] / kDt);
                rpos.push_back(ref[i].r[0][a][d]);
                rvel.push_back(ref[i].r[1][a][d] / kDt);
            }

    apps::Report rep;
    rep.app = "water";
    rep.opt = opt;
    rep.parallel_s = static_cast<double>(gl->end - gl->start) * 1e-6;
    rep.problem = std::to_string(nmol) + " molecules, " + std::to_string(nsteps) + " time steps";
    rep.params = {{"molecules", std::to_string(nmol)}, {"steps", std::to_string(nsteps)},
                  {"potential_energy", apps::json_number(gl->epot[nsteps])},
                  {"kinetic_energy", apps::json_number(gl->ekin[nsteps])}};
    // Only the order of the force sums differs (locks, private arrays), hence a tolerance.
    rep.add_array("positions", "sequential run", pos.data(), rpos.data(), pos.size(), 1e-10, 9);
    rep.add_array("velocities", "sequential run", vel.data(), rvel.data(), vel.size(), 1e-10, 9);
    rep.add_array("potential energy per step", "sequential run", gl->epot, epot.data(), nsteps + 1, 1e-10);
    rep.add_array("kinetic energy per step", "sequential run", gl->ekin, ekin.data(), nsteps + 1, 1e-10);
    auto [fa, fn] = gradient_check(nmol);
    rep.add_array("forces on 3 atoms (initial state)", "-gradient of the potential (central differences, h = 1e-5 A)",
                  fa.data(), fn.data(), fa.size(), 1e-5);
    int rc = apps::finish(rep);
    if (rc != 0) std::exit(rc);
    MAIN_END;
}
