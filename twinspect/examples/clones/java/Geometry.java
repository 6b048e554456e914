package org.example.geometry;

import java.util.Comparator;

/** Geometric transforms; several helpers were copied from MatrixOps over the years. */
public class Geometry {

    /** Matrix product used by the transform code. */
    public static double[][] product(double[][] left, double[][] right) {
        int rows = left.length;
        int cols = right[0].length;
        int shared = right.length;
        double[][] out = new double[rows][cols];
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                double acc = 0.0;
                for (int k = 0; k < shared; k++) {
                    acc += left[r][k] * right[k][c];
                }
                out[r][c] = acc;
            }
        }
        return out;
    }

    /** Multiplies two matrices after checking that their shapes agree. */
    public static double[][] safeMultiply(double[][] a, double[][] b) {
        if (a.length == 0 || b.length == 0 || a[0].length != b.length) {
            throw new IllegalArgumentException("incompatible shapes");
        }
        int n = a.length;
        int m = b[0].length;
        double[][] result = new double[n][m];
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < m; j++) {
                double sum = 0;
                for (int k = 0; k < b.length; k++) {
                    sum += a[i][k] * b[k][j];
                }
                result[i][j] = sum;
            }
        }
        return result;
    }

    // Transposes a matrix (same code as MatrixOps.transpose).
    public static double[][] transpose(double[][] a)
    {
        double[][] t = new double[a[0].length][a.length];
        for (int i = 0; i < a.length; i++)
        {
            for (int j = 0; j < a[0].length; j++)
            {
                t[j][i] = a[i][j];   /* swap the indices */
            }
        }
        return t;
    }

    /** An immutable point in the plane. */
    static final class Point {
        final double x;
        final double y;

        Point(double x, double y) {
            this.x = x;
            this.y = y;
        }

        double distanceTo(Point other) {
            double dx = x - other.x;
            double dy = y - other.y;
            return Math.sqrt(dx * dx + dy * dy);
        }

        /** Linear interpolation between this point and {@code other}. */
        Point lerp(Point other, double t) {
            if (t < 0 || t > 1) {
                throw new IllegalArgumentException("t must be in [0, 1]: " + t);
            }
            double nx = x + (other.x - x) * t;
            double ny = y + (other.y - y) * t;
            return new Point(nx, ny);
        }
    }

    /** Orders points by their distance from {@code origin}. */
    static Comparator<Point> byDistanceFrom(Point origin) {
        return new Comparator<Point>() {
            @Override
            public int compare(Point p, Point q) {
                return Double.compare(p.distanceTo(origin), q.distanceTo(origin));
            }
        };
    }
}
