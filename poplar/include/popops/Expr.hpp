// ipuxl's PopLibs: popops::expr, expression trees for popops::map
// (placeholders _1.._20 stand for the map's input tensors).
#pragma once
#include <memory>
#include <poplar/HalfFloat.hpp>
#include <poplar/Type.hpp>
#include <popops/ExprOp.hpp>
#include <string>
#include <type_traits>

namespace popops {
namespace expr {

class Expr {
public:
  virtual ~Expr() = default;
  virtual std::unique_ptr<Expr> clone() const = 0;
  template <class T> bool isA() const { return dynamic_cast<const T *>(this) != nullptr; }
  template <class T> const T *getAs() const { return dynamic_cast<const T *>(this); }
  virtual std::string name() const = 0;
};

template <class T> class ExprType : public Expr {
public:
  std::unique_ptr<Expr> clone() const override { return std::unique_ptr<Expr>(new T(static_cast<const T &>(*this))); }
};

/// A constant; its type is that of the C++ value (float, int, unsigned, bool, half).
class Const : public ExprType<Const> {
public:
  Const(float v) : type_(poplar::FLOAT), value_(v) {}
  Const(double v) : type_(poplar::FLOAT), value_(v) {}
  Const(int v) : type_(poplar::INT), value_(v) {}
  Const(unsigned v) : type_(poplar::UNSIGNED_INT), value_(v) {}
  Const(long v) : type_(poplar::INT), value_(static_cast<double>(v)) {}
  Const(unsigned long v) : type_(poplar::UNSIGNED_INT), value_(static_cast<double>(v)) {}
  Const(long long v) : type_(poplar::INT), value_(static_cast<double>(v)) {}
  Const(bool v) : type_(poplar::BOOL), value_(v ? 1.0 : 0.0) {}
  Const(short v) : type_(poplar::SHORT), value_(v) {}
  Const(unsigned short v) : type_(poplar::UNSIGNED_SHORT), value_(v) {}
  Const(poplar::half v) : type_(poplar::HALF), value_(static_cast<float>(v)) {}
  const poplar::Type &getType() const { return type_; }
  double ipuxlValue() const { return value_; }
  std::string name() const override { return "Const"; }

protected:
  Const(poplar::Type t, double v) : type_(t), value_(v) {}

private:
  poplar::Type type_;
  double value_;
};

class ConstHalf : public Const {
public:
  ConstHalf(float v) : Const(poplar::HALF, static_cast<float>(poplar::half(v))) {}
};

class PlaceHolder : public ExprType<PlaceHolder> {
public:
  explicit PlaceHolder(unsigned index) : index_(index) {}
  unsigned getIndex() const { return index_; }
  std::string name() const override { return "_" + std::to_string(index_); }

private:
  unsigned index_;
};

class Cast : public ExprType<Cast> {
public:
  Cast(const Expr &a, const poplar::Type &t) : a_(a.clone()), t_(t) {}
  Cast(const Cast &o) : ExprType<Cast>(), a_(o.a_->clone()), t_(o.t_) {}
  const Expr &getLHS() const { return *a_; }
  const poplar::Type &getRHSType() const { return t_; }
  std::string name() const override { return "Cast"; }

private:
  std::unique_ptr<Expr> a_;
  poplar::Type t_;
};

class UnaryOp : public ExprType<UnaryOp> {
public:
  UnaryOp(UnaryOpType type, const Expr &a) : type_(type), a_(a.clone()) {}
  UnaryOp(const UnaryOp &o) : ExprType<UnaryOp>(), type_(o.type_), a_(o.a_->clone()) {}
  UnaryOpType getOpType() const { return type_; }
  const Expr &getArg() const { return *a_; }
  std::string name() const override { return "UnaryOp"; }

private:
  UnaryOpType type_;
  std::unique_ptr<Expr> a_;
};

class BinaryOp : public ExprType<BinaryOp> {
public:
  BinaryOp(BinaryOpType type, const Expr &a, const Expr &b) : type_(type), a_(a.clone()), b_(b.clone()) {}
  BinaryOp(const BinaryOp &o) : ExprType<BinaryOp>(), type_(o.type_), a_(o.a_->clone()), b_(o.b_->clone()) {}
  BinaryOpType getOpType() const { return type_; }
  const Expr &getLHS() const { return *a_; }
  const Expr &getRHS() const { return *b_; }
  std::string name() const override { return "BinaryOp"; }

private:
  BinaryOpType type_;
  std::unique_ptr<Expr> a_, b_;
};

class TernaryOp : public ExprType<TernaryOp> {
public:
  TernaryOp(TernaryOpType type, const Expr &a, const Expr &b, const Expr &c)
      : type_(type), a_(a.clone()), b_(b.clone()), c_(c.clone()) {}
  TernaryOp(const TernaryOp &o)
      : ExprType<TernaryOp>(), type_(o.type_), a_(o.a_->clone()), b_(o.b_->clone()), c_(o.c_->clone()) {}
  TernaryOpType getOpType() const { return type_; }
  const Expr &getArg0() const { return *a_; }
  const Expr &getArg1() const { return *b_; }
  const Expr &getArg2() const { return *c_; }
  std::string name() const override { return "TernaryOp"; }

private:
  TernaryOpType type_;
  std::unique_ptr<Expr> a_, b_, c_;
};

#define POPOPS_IPUXL_UNARY(NAME, OP)                                                               \
  class NAME : public UnaryOp {                                                                    \
  public:                                                                                          \
    explicit NAME(const Expr &a) : UnaryOp(UnaryOpType::OP, a) {}                                  \
  };
POPOPS_IPUXL_UNARY(Abs, ABSOLUTE)
POPOPS_IPUXL_UNARY(Asin, ASIN)
POPOPS_IPUXL_UNARY(BitwiseNot, BITWISE_NOT)
POPOPS_IPUXL_UNARY(Cbrt, CBRT)
POPOPS_IPUXL_UNARY(Ceil, CEIL)
POPOPS_IPUXL_UNARY(Cos, COS)
POPOPS_IPUXL_UNARY(Erf, ERF)
POPOPS_IPUXL_UNARY(Exp, EXPONENT)
POPOPS_IPUXL_UNARY(Expm1, EXPONENT_MINUS_ONE)
POPOPS_IPUXL_UNARY(Exp2, EXPONENT2)
POPOPS_IPUXL_UNARY(Floor, FLOOR)
POPOPS_IPUXL_UNARY(GeluErf, GELU_ERF)
POPOPS_IPUXL_UNARY(Inv, INVERSE)
POPOPS_IPUXL_UNARY(IsFinite, IS_FINITE)
POPOPS_IPUXL_UNARY(IsInf, IS_INF)
POPOPS_IPUXL_UNARY(IsNaN, IS_NAN)
POPOPS_IPUXL_UNARY(Log, LOGARITHM)
POPOPS_IPUXL_UNARY(Log1p, LOGARITHM_ONE_PLUS)
POPOPS_IPUXL_UNARY(Not, LOGICAL_NOT)
POPOPS_IPUXL_UNARY(NearbyInt, NEARBY_INT)
POPOPS_IPUXL_UNARY(Neg, NEGATE)
POPOPS_IPUXL_UNARY(Relu, RELU)
POPOPS_IPUXL_UNARY(Round, ROUND)
POPOPS_IPUXL_UNARY(Signum, SIGNUM)
POPOPS_IPUXL_UNARY(Sin, SIN)
POPOPS_IPUXL_UNARY(Sqrt, SQRT)
POPOPS_IPUXL_UNARY(Square, SQUARE)
POPOPS_IPUXL_UNARY(Tan, TAN)
POPOPS_IPUXL_UNARY(Tanh, TANH)
POPOPS_IPUXL_UNARY(Sigmoid, SIGMOID)
POPOPS_IPUXL_UNARY(Rsqrt, RSQRT)
POPOPS_IPUXL_UNARY(Trunc, TRUNC)
#undef POPOPS_IPUXL_UNARY

#define POPOPS_IPUXL_BINARY(NAME, OP)                                                              \
  class NAME : public BinaryOp {                                                                   \
  public:                                                                                          \
    NAME(const Expr &a, const Expr &b) : BinaryOp(BinaryOpType::OP, a, b) {}                       \
  };
POPOPS_IPUXL_BINARY(Add, ADD)
POPOPS_IPUXL_BINARY(Atan2, ATAN2)
POPOPS_IPUXL_BINARY(BitwiseAnd, BITWISE_AND)
POPOPS_IPUXL_BINARY(BitwiseOr, BITWISE_OR)
POPOPS_IPUXL_BINARY(BitwiseXor, BITWISE_XOR)
POPOPS_IPUXL_BINARY(Divide, DIVIDE)
POPOPS_IPUXL_BINARY(Equal, EQUAL)
POPOPS_IPUXL_BINARY(Gte, GREATER_THAN_EQUAL)
POPOPS_IPUXL_BINARY(Gt, GREATER_THAN)
POPOPS_IPUXL_BINARY(Lte, LESS_THAN_EQUAL)
POPOPS_IPUXL_BINARY(And, LOGICAL_AND)
POPOPS_IPUXL_BINARY(Or, LOGICAL_OR)
POPOPS_IPUXL_BINARY(Lt, LESS_THAN)
POPOPS_IPUXL_BINARY(Max, MAXIMUM)
POPOPS_IPUXL_BINARY(Min, MINIMUM)
POPOPS_IPUXL_BINARY(Mul, MULTIPLY)
POPOPS_IPUXL_BINARY(NotEqual, NOT_EQUAL)
POPOPS_IPUXL_BINARY(Pow, POWER)
POPOPS_IPUXL_BINARY(Rem, REMAINDER)
POPOPS_IPUXL_BINARY(Shl, SHIFT_LEFT)
POPOPS_IPUXL_BINARY(Shr, SHIFT_RIGHT)
POPOPS_IPUXL_BINARY(ShrSE, SHIFT_RIGHT_SIGN_EXTEND)
POPOPS_IPUXL_BINARY(Sub, SUBTRACT)
#undef POPOPS_IPUXL_BINARY

class Select : public TernaryOp {
public:
  /// a where c is true, else b.
  Select(const Expr &a, const Expr &b, const Expr &c) : TernaryOp(TernaryOpType::SELECT, a, b, c) {}
};
class Clamp : public TernaryOp {
public:
  Clamp(const Expr &a, const Expr &lo, const Expr &hi) : TernaryOp(TernaryOpType::CLAMP, a, lo, hi) {}
};

namespace placeholders {}
static const PlaceHolder _1(1), _2(2), _3(3), _4(4), _5(5), _6(6), _7(7), _8(8), _9(9), _10(10), _11(11),
    _12(12), _13(13), _14(14), _15(15), _16(16), _17(17), _18(18), _19(19), _20(20);

template <class T>
using ipuxlIfScalar = typename std::enable_if<std::is_arithmetic<T>::value || std::is_same<T, poplar::half>::value, int>::type;

#define POPOPS_IPUXL_OPERATOR(SYM, CLS)                                                            \
  inline CLS operator SYM(const Expr &a, const Expr &b) { return CLS(a, b); }                      \
  template <class T, ipuxlIfScalar<T> = 0> CLS operator SYM(const T &a, const Expr &b) { return CLS(Const(a), b); } \
  template <class T, ipuxlIfScalar<T> = 0> CLS operator SYM(const Expr &a, const T &b) { return CLS(a, Const(b)); }
POPOPS_IPUXL_OPERATOR(+, Add)
POPOPS_IPUXL_OPERATOR(-, Sub)
POPOPS_IPUXL_OPERATOR(*, Mul)
POPOPS_IPUXL_OPERATOR(/, Divide)
POPOPS_IPUXL_OPERATOR(%, Rem)
POPOPS_IPUXL_OPERATOR(==, Equal)
POPOPS_IPUXL_OPERATOR(!=, NotEqual)
POPOPS_IPUXL_OPERATOR(<, Lt)
POPOPS_IPUXL_OPERATOR(<=, Lte)
POPOPS_IPUXL_OPERATOR(>, Gt)
POPOPS_IPUXL_OPERATOR(>=, Gte)
POPOPS_IPUXL_OPERATOR(&&, And)
POPOPS_IPUXL_OPERATOR(||, Or)
POPOPS_IPUXL_OPERATOR(&, BitwiseAnd)
POPOPS_IPUXL_OPERATOR(|, BitwiseOr)
POPOPS_IPUXL_OPERATOR(^, BitwiseXor)
POPOPS_IPUXL_OPERATOR(<<, Shl)
POPOPS_IPUXL_OPERATOR(>>, Shr)
#undef POPOPS_IPUXL_OPERATOR
inline Neg operator-(const Expr &a) { return Neg(a); }
inline Not operator!(const Expr &a) { return Not(a); }
inline BitwiseNot operator~(const Expr &a) { return BitwiseNot(a); }

} // namespace expr
} // namespace popops
