// matrix.hpp - a minimal dense matrix type.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <vector>

namespace linalg {

class Matrix {
public:
    Matrix(std::size_t rows, std::size_t cols)
        : rows_(rows), cols_(cols), data_(rows * cols, 0.0) {}

    double &at(std::size_t r, std::size_t c) { return data_[r * cols_ + c]; }
    double at(std::size_t r, std::size_t c) const { return data_[r * cols_ + c]; }
    std::size_t rows() const { return rows_; }
    std::size_t cols() const { return cols_; }

    Matrix operator*(const Matrix &other) const;

    Matrix transposed() const {
        Matrix t(cols_, rows_);
        for (std::size_t i = 0; i < rows_; ++i) {
            for (std::size_t j = 0; j < cols_; ++j) {
                t.at(j, i) = at(i, j);
            }
        }
        return t;
    }

private:
    std::size_t rows_, cols_;
    std::vector<double> data_;
};

/* Index of the first element of the sorted vector v that is not less than key. */
template <typename T>
std::size_t lower_bound_index(const std::vector<T> &v, const T &key) {
    std::size_t lo = 0, hi = v.size();
    while (lo < hi) {
        std::size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

}  // namespace linalg
